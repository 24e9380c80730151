/* squash-reader: slurm-squash's FUSE server for squashfs images (see
 * squash-reader(8) and docs/architecture.md). squashd runs it as the job
 * user on an image descriptor and a mounted /dev/fuse descriptor it
 * opened itself; it also mounts a directory on its own, like
 * squashfuse_ll, for benchmarks and by hand. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile_cache_path.h"
#include "reader_wire.h"
#include "reader/idle_trim.h"
#include "reader/image.h"
#include "reader/image_path.h"
#include "reader/ops.h"
#include "reader/serve.h"
#include "reader/session.h"
#include "reader/start_profile.h"
#include "reader/union_tree.h"
#include "reader/untraceable.h"
#ifdef HAVE_LIBZSTD
#include "reader/zstd_block.h"
#endif

#define DEFAULT_THREADS 8
/* How long an exit waits for learned start profiles being written. */
#define LEARN_DRAIN_MS 5000

static void usage(FILE *out)
{
	/* The first line is what squashd's probe (fuse_reader.c) reads. */
	fprintf(out,
		"squash-reader %s (slurm-squash), multithreaded\n"
		"usage: squash-reader [options] IMAGE MOUNTPOINT\n"
		"       squash-reader [options] --union IMAGE... MOUNTPOINT\n"
		"       squash-reader [options] --serve /dev/fd/N\n"
		"       squash-reader --prefetch IMAGE [--walk DIR]\n"
		"       squash-reader --cat IMAGE PATH\n"
		"  IMAGE and MOUNTPOINT may be /dev/fd/N (an open image; a mounted /dev/fuse)\n"
		"  -f                 stay in the foreground (always; for squashfuse_ll's syntax)\n"
		"  -o OPTS            more mount options when mounting a directory\n"
		"  -t, --threads N    worker threads at most (default %d; 1: single-threaded); with\n"
		"                     --serve for all mounts together (default: twice the CPUs, 8..64)\n"
		"  --resume           MOUNTPOINT is a live connection whose reader died: take it\n"
		"                     over and have the kernel resend its unanswered requests\n"
		"  --union            serve the images merged as overlayfs would merge them as\n"
		"                     lower layers, the last on top\n"
		"  --serve /dev/fd/N  serve every mount squashd sends over this socket, one\n"
		"                     session each, all by one set of threads, until squashd\n"
		"                     closes it and the last is gone\n"
		"  --poll-us N        the worker that answered one process waits for its next\n"
		"                     request on that process's CPU, or, where that CPU cannot\n"
		"                     be read, polls N microseconds for it (default %d;\n"
		"                     0..%d; 0: neither)\n"
		"  --plus WHAT        which entries a listing (READDIRPLUS) hands the kernel\n"
		"                     with their attributes: all; dirs (files are looked up\n"
		"                     when stat'ed); auto (dirs, all for a thread that has\n"
		"                     looked a file up; default all)\n"
		"  --record-profile FILE  (IMAGE MOUNTPOINT only) when the mount ends, write\n"
		"                     to FILE which bytes of which files were read: the\n"
		"                     start profile squash-pack --profile stores in an image\n"
		"  --profile-cache TEMPLATE  learn start profiles: for a single image without\n"
		"                     one, use the profile learned at an earlier mount, or\n"
		"                     record this one's and write it below TEMPLATE (%%h home,\n"
		"                     %%u user name, %%U uid, %%%% a percent)\n"
		"  --prefetch IMAGE   ask the kernel to read IMAGE's start profile ahead into\n"
		"                     the page cache, and exit (squashd, for kernel mounts)\n"
		"  --walk DIR         with --prefetch: also list the profile's directories and\n"
		"                     read its small files through DIR, IMAGE's mount\n"
		"  --cat IMAGE PATH   write the file PATH of IMAGE (relative to its root) to\n"
		"                     stdout, and exit: 3 when IMAGE has no such file, 4 when\n"
		"                     it is not a regular file (squash-images inspect)\n"
		"  -d                 FUSE debug output\n"
		"  -h, --help         this text\n",
		PACKAGE_VERSION, DEFAULT_THREADS, SERVE_POLL_US_DEFAULT, SERVE_POLL_US_MAX);
}

/* The descriptor a /dev/fd/N argument names, or -1. */
static int fd_argument(const char *path)
{
	unsigned fd;
	char end;

	if (sscanf(path, "/dev/fd/%u%c", &fd, &end) != 1 || fd > INT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	return fcntl((int)fd, F_GETFD) < 0 ? -1 : (int)fd;
}

static int open_image(const char *path)
{
	return strncmp(path, "/dev/fd/", 8) == 0 ? fd_argument(path) : open(path, O_RDONLY | O_CLOEXEC);
}

/* --record-profile FILE: what the mount's readers read, once it ended. */
static int write_profile(struct profile_recorder *rec, struct image *img, const char *path)
{
	FILE *f = fopen(path, "we");
	int n;

	if (!f) {
		fprintf(stderr, "squash-reader: cannot write the profile %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = profile_recorder_write(rec, img, f, 0);
	if (fclose(f) != 0 && n >= 0)
		n = -EIO;
	if (n < 0) {
		fprintf(stderr, "squash-reader: cannot write the profile %s: %s\n", path, strerror(-n));
		return -1;
	}
	return 0;
}

/* The image at path, opened (its descriptor in *fd) and checked for a
 * command that exits after its work (--prefetch, --cat), or NULL with the
 * reason on stderr. */
static struct image *open_checked(const char *path, int *fd_out)
{
	struct image *img = NULL;
	char err[256];
	int fd = open_image(path);

	if (fd < 0) {
		fprintf(stderr, "squash-reader: cannot open %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (image_open(fd, 0, 0, &img, err, sizeof(err)) < 0) {
		fprintf(stderr, "squash-reader: %s: %s\n", path, err);
		close(fd);
		return NULL;
	}
	*fd_out = fd;
	return img;
}

static void close_checked(struct image *img, int fd)
{
	image_close(img);
	close(fd);
}

/* --prefetch IMAGE [--walk DIR]: the image's start profile asked for,
 * then exit (the kernel reads on). squashd runs it after a kernel mount of
 * a trusted image, whose loop device reads the image file through the same
 * page cache; DIR, that mount, then gets the profile walked through it
 * (start_profile.h) before the exit. */
static int prefetch_only(const char *path, const char *walk)
{
	int fd;
	struct image *img = open_checked(path, &fd);

	if (!img)
		return 1;
	if (walk)
		start_profile_walk_begin(img, open(walk, O_PATH | O_DIRECTORY | O_CLOEXEC));
	start_profile_prefetch_wait(img);
	start_profile_walk_wait(img);
	close_checked(img, fd);
	return 0;
}

/* --cat IMAGE PATH: one file of the image to stdout, without a mount
 * (squash-images inspect runs it as the caller, bounded in time and
 * output). Exit 3: no such file; 4: it is there, but not a regular file
 * (what inspect asks of etc/os-release and usr/bin); 1: any other failure. */
static int cat_only(const char *path, const char *inner)
{
	int fd, rc = 0;
	struct image *img = open_checked(path, &fd);
	struct inode in;
	const char *why = NULL;
	bool not_regular = false;

	if (!img)
		return 1;
	inner += strspn(inner, "/");
	if (!image_path_valid(inner))
		why = "not a path of a file in an image";
	else if ((rc = image_path_resolve(img, inner, &in)) < 0)
		why = rc == -ENOENT ? "no such file in the image" : strerror(-rc);
	else if ((not_regular = !S_ISREG(in.mode))) /* a link is never followed: it may lead out */
		why = "not a regular file";
	else if ((rc = image_file_write(img, &in, stdout)) < 0)
		why = strerror(-rc);
	if (why)
		fprintf(stderr, "squash-reader: %s: /%s: %s\n", path, inner, why);
	close_checked(img, fd);
	return !why ? 0 : rc == -ENOENT ? 3 : not_regular ? 4 : 1;
}

/* --union IMAGE... MOUNTPOINT: one mount of the images merged. */
static int run_union(int n, char **images, const char *mountpoint, struct session_options *opt)
{
	struct reader rd = { 0 };
	char err[256];
	int *fds, status;

	if (n < 1 || (unsigned)n > UNION_MAX_LAYERS) {
		fprintf(stderr, "squash-reader: --union wants 1 to %u images and a mount point\n",
			UNION_MAX_LAYERS);
		return 2;
	}
	/* A descriptor per image, for as long as the mount lives. */
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!(fds = calloc((size_t)n, sizeof(*fds)))) {
		fprintf(stderr, "squash-reader: out of memory\n");
		return 1;
	}
	int opened = 0;

	while (opened < n && (fds[opened] = open_image(images[opened])) >= 0)
		opened++;
	if (opened < n) {
		fprintf(stderr, "squash-reader: cannot open %s: %s\n", images[opened], strerror(errno));
		while (opened > 0)
			close(fds[--opened]);
		free(fds);
		return 1;
	}
	/* fds are rd's from here on. */
	if (reader_union_open(&rd, fds, (unsigned)n, err, sizeof(err)) < 0) {
		fprintf(stderr, "squash-reader: %s\n", err);
		reader_union_close(&rd);
		return 1;
	}
	opt->own_signals = true;
	opt->mountpoint = mountpoint;
	status = session_run(&rd, opt);
	reader_union_close(&rd);
	return status;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "resume", no_argument, NULL, 'R' },
		{ "serve", required_argument, NULL, 'S' },
		{ "union", no_argument, NULL, 'U' },
		{ "poll-us", required_argument, NULL, 'P' },
		{ "plus", required_argument, NULL, 'L' },
		{ "record-profile", required_argument, NULL, 'Q' },
		{ "profile-cache", required_argument, NULL, 'K' },
		{ "prefetch", required_argument, NULL, 'F' },
		{ "walk", required_argument, NULL, 'W' },
		{ "cat", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* max_threads 0: not given */
	/* --plus all: files unlinked lose more where a listing's files are
	 * stat'ed or opened by another process than a walk by names wins
	 * (docs/performance.md section 16). */
	struct session_options opt = { .max_threads = 0, .poll_us = SERVE_POLL_US_DEFAULT,
				       .plus = PLUS_ALL };
	struct reader rd = { 0 };
	const char *serve_socket = NULL, *record_to = NULL, *prefetch = NULL, *cat = NULL, *walk = NULL;
	const char *profile_cache = NULL;
	struct profile_recorder *rec = NULL;
	bool union_mode = false;
	char err[256];
	int c, fd, status;

	/* Memory per mount (docs/performance.md): one malloc arena for all
	 * threads, and block buffers (64 KiB and up) mmapped, so that what a
	 * burst of reads allocated goes back to the system when freed. */
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	mallopt(M_TRIM_THRESHOLD, 128 * 1024);

	while ((c = getopt_long(argc, argv, "fo:t:dh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			break;
		case 'o':
			opt.mount_opts = optarg;
			break;
		case 't':
			opt.max_threads = (unsigned)atoi(optarg);
			if (opt.max_threads < 1 || opt.max_threads > 256) {
				fprintf(stderr, "squash-reader: --threads wants 1..256\n");
				return 2;
			}
			break;
		case 'P': {
			char *end;
			unsigned long us = strtoul(optarg, &end, 10);

			if (!*optarg || *end || us > SERVE_POLL_US_MAX) {
				fprintf(stderr, "squash-reader: --poll-us wants 0..%d\n", SERVE_POLL_US_MAX);
				return 2;
			}
			opt.poll_us = (unsigned)us;
			break;
		}
		case 'L':
			if (plus_mode_parse(optarg, &opt.plus) < 0) {
				fprintf(stderr, "squash-reader: --plus wants all, dirs or auto\n");
				return 2;
			}
			break;
		case 'Q':
			record_to = optarg;
			break;
		case 'K':
			profile_cache = optarg;
			break;
		case 'F':
			prefetch = optarg;
			break;
		case 'W':
			walk = optarg;
			break;
		case 'C':
			cat = optarg;
			break;
		case 'R':
			opt.resume = true;
			break;
		case 'S':
			serve_socket = optarg;
			break;
		case 'U':
			union_mode = true;
			break;
		case 'd':
			opt.debug = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
#ifdef HAVE_LIBZSTD
	/* Before any FUSE session takes a thread key (zstd_block.h). */
	if ((c = zstd_block_init()) != 0) {
		fprintf(stderr, "squash-reader: cannot set up the zstd decompressor: %s\n", strerror(c));
		return 1;
	}
#endif
	if ((cat || prefetch) && profile_cache) {
		usage(stderr);
		return 2;
	}
	if (cat) {
		if (argc != optind + 1 || prefetch || serve_socket || union_mode || record_to || opt.resume) {
			usage(stderr);
			return 2;
		}
		return cat_only(cat, argv[optind]);
	}
	if (prefetch) {
		if (argc != optind || serve_socket || union_mode || record_to || opt.resume) {
			usage(stderr);
			return 2;
		}
		return prefetch_only(prefetch, walk);
	}
	if (walk) {
		usage(stderr);
		return 2;
	}
	if (record_to && (serve_socket || union_mode || opt.resume || profile_cache)) {
		fprintf(stderr, "squash-reader: --record-profile is for one IMAGE and a MOUNTPOINT\n");
		return 2;
	}
	/* Before any other thread starts, so that a tracer attached by now
	 * shows on this one (reader/untraceable.h). */
	if (serve_socket && reader_make_untraceable(err, sizeof(err)) < 0) {
		fprintf(stderr, "squash-reader: --serve: %s; not serving\n", err);
		return 1;
	}
	/* Checked here, expanded (as this user) only when an image learns.
	 * squashd's readers serve on without it: learning is only advice. */
	if (profile_cache && profile_cache_template_check(profile_cache) < 0) {
		fprintf(stderr, "squash-reader: --profile-cache: %s is not a path template (%%h, %%u, %%U, %%%%)%s\n",
			profile_cache, serve_socket ? "; learning no start profiles" : "");
		if (!serve_socket)
			return 2;
		profile_cache = NULL;
	}
	start_profile_learn_configure(profile_cache);
	/* Serving from here on: caches nobody uses go back to the system.
	 * Without the thread (the user's pids limit) they only stay full. */
	if ((c = idle_trim_start(IDLE_TRIM_MS)) != 0)
		fprintf(stderr, "squash-reader: cannot start the idle trim: %s\n", strerror(c));
	else
		atexit(idle_trim_stop);
	if (serve_socket) {
		if (argc != optind || opt.resume || opt.mount_opts) {
			usage(stderr);
			return 2;
		}
		fd = fd_argument(serve_socket);
		if (fd < 0) {
			fprintf(stderr, "squash-reader: --serve %s: %s\n", serve_socket, strerror(errno));
			return 1;
		}
		status = serve_run(fd, &opt);
		start_profile_learn_drain(LEARN_DRAIN_MS);
		return status;
	}
	if (!opt.max_threads)
		opt.max_threads = DEFAULT_THREADS;
	if (union_mode)
		return run_union(argc - optind - 1, argv + optind, argv[argc - 1], &opt);
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	opt.own_signals = true;
	opt.mountpoint = argv[optind + 1];
	fd = open_image(argv[optind]);
	if (fd < 0) {
		fprintf(stderr, "squash-reader: cannot open %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	if (image_open(fd, 0, 0, &rd.img, err, sizeof(err)) < 0) {
		fprintf(stderr, "squash-reader: %s: %s\n", argv[optind], err);
		return 1;
	}
	if (record_to) {
		if (!(rec = profile_recorder_new())) {
			fprintf(stderr, "squash-reader: out of memory\n");
			return 1;
		}
		image_record_profile(rd.img, rec);
	}
	status = session_run(&rd, &opt);
	if (rec) {
		image_record_profile(rd.img, NULL);
		status = write_profile(rec, rd.img, record_to) < 0 && status == 0 ? 1 : status;
		profile_recorder_free(rec);
	}
	image_close(rd.img);
	close(fd);
	start_profile_learn_drain(LEARN_DRAIN_MS);
	return status;
}

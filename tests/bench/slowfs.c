/* slowfs: a read-only FUSE passthrough that adds a fixed delay to every
 * metadata request, standing in for a parallel filesystem (Lustre, GPFS,
 * NFS) whose every lookup/getattr/open/readdir is a round trip to a
 * metadata server. Data reads are passed through without delay, unless
 * read_delay_us (a round trip to an object server per read request) or
 * bw_mib (the link's bandwidth, shared by all requests) is given.
 *
 *   slowfs SOURCE MOUNTPOINT [-o delay_us=N] [-o read_delay_us=N]
 *          [-o bw_mib=N] [-o stats=FILE] [FUSE options]
 *
 * Delayed: getattr (the kernel's LOOKUP and GETATTR both end here),
 * readlink, open, opendir, readdir, statfs, access; read by read_delay_us
 * plus its bytes at bw_mib MiB/s. Not delayed: release, releasedir, flush,
 * forget. The kernel caches entries and
 * attributes for entry_timeout/attr_timeout/negative_timeout seconds
 * (libfuse's default: 1 s; set them with -o), as a Lustre client caches
 * metadata under its locks. Multithreaded (libfuse's default), so
 * concurrent requests wait in parallel, as they do on a network.
 * With -o stats=FILE the number of delayed metadata requests, of read
 * requests and of the bytes they returned is written to FILE when the
 * filesystem is unmounted. With -o stall_uid=N the metadata
 * requests of uid N are never answered (a server hung as that uid sees it;
 * the integration tests use it to show squashd never asks one).
 *
 * Part of the benchmark (tests/bench/run.sh builds it), not of the product. */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct slowfs_opts {
	unsigned delay_us;
	unsigned read_delay_us;
	unsigned bw_mib;
	char *stats;
	int stall_uid;
};

static struct slowfs_opts opts = { .delay_us = 300, .stall_uid = -1 };
static int source_fd = -1;
static unsigned long n_delayed, n_reads;
static unsigned long long read_bytes;
/* bw_mib: when the link is free again (CLOCK_MONOTONIC, ns). */
static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long link_free_ns;

static const struct fuse_opt option_spec[] = {
	{ "delay_us=%u", offsetof(struct slowfs_opts, delay_us), 0 },
	{ "read_delay_us=%u", offsetof(struct slowfs_opts, read_delay_us), 0 },
	{ "bw_mib=%u", offsetof(struct slowfs_opts, bw_mib), 0 },
	{ "stats=%s", offsetof(struct slowfs_opts, stats), 0 },
	{ "stall_uid=%d", offsetof(struct slowfs_opts, stall_uid), 0 },
	FUSE_OPT_END
};

static void sleep_us(unsigned us)
{
	struct timespec ts;

	if (!us)
		return;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (long)(us % 1000000) * 1000;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void delay(void)
{
	__atomic_add_fetch(&n_delayed, 1, __ATOMIC_RELAXED);
	if (opts.stall_uid >= 0 && fuse_get_context()->uid == (uid_t)opts.stall_uid)
		for (;;)
			pause(); /* this worker only; the others go on serving */
	sleep_us(opts.delay_us);
}

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* A read's round trip, then its bytes over a link of bw_mib MiB/s that all
 * requests share: each reserves its transfer time after the previous
 * one's and sleeps until its own ends. */
static void read_delay(size_t bytes)
{
	unsigned long long start, done;

	sleep_us(opts.read_delay_us);
	if (!opts.bw_mib)
		return;
	pthread_mutex_lock(&link_lock);
	start = now_ns();
	if (link_free_ns > start)
		start = link_free_ns;
	done = start + (unsigned long long)bytes * 1000000000ull / ((unsigned long long)opts.bw_mib << 20);
	link_free_ns = done;
	pthread_mutex_unlock(&link_lock);
	start = now_ns();
	if (done > start)
		sleep_us((unsigned)((done - start) / 1000));
}

/* FUSE paths start with '/'; make them relative to the source directory. */
static const char *rel(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

static void *sf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->use_ino = 1;
	cfg->kernel_cache = 1;
	cfg->nullpath_ok = 0;
	return NULL;
}

static void sf_destroy(void *data)
{
	FILE *f;

	if (!opts.stats)
		return;
	f = fopen(opts.stats, "w");
	if (f) {
		fprintf(f, "delayed_requests %lu\nread_requests %lu\nread_bytes %llu\n",
			n_delayed, n_reads, read_bytes);
		fclose(f);
	}
}

static int sf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	delay();
	if (fi)
		return fstat((int)fi->fh, st) < 0 ? -errno : 0;
	return fstatat(source_fd, rel(path), st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int sf_readlink(const char *path, char *buf, size_t size)
{
	ssize_t n;

	delay();
	n = readlinkat(source_fd, rel(path), buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int sf_access(const char *path, int mask)
{
	delay();
	return faccessat(source_fd, rel(path), mask, 0) < 0 ? -errno : 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi)
{
	int fd;

	delay();
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	fd = openat(source_fd, rel(path), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 1;
	return 0;
}

static int sf_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	ssize_t n = pread((int)fi->fh, buf, size, off);

	if (n < 0)
		return -errno;
	__atomic_add_fetch(&n_reads, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&read_bytes, (unsigned long long)n, __ATOMIC_RELAXED);
	read_delay((size_t)n);
	return (int)n;
}

static int sf_release(const char *path, struct fuse_file_info *fi)
{
	close((int)fi->fh);
	return 0;
}

static int sf_opendir(const char *path, struct fuse_file_info *fi)
{
	int fd;
	DIR *d;

	delay();
	fd = openat(source_fd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		int e = errno;

		close(fd);
		return -e;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	return 0;
}

/* Returns the whole directory in one call (offset 0 to the filler): libfuse
 * buffers it and serves the kernel's READDIR requests from that buffer. */
static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t filler,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	struct dirent *e;

	delay();
	rewinddir(d);
	while ((e = readdir(d)) != NULL) {
		struct stat st;

		memset(&st, 0, sizeof st);
		st.st_ino = e->d_ino;
		st.st_mode = (mode_t)DTTOIF(e->d_type);
		if (filler(buf, e->d_name, &st, 0, 0))
			break;
	}
	return 0;
}

static int sf_releasedir(const char *path, struct fuse_file_info *fi)
{
	closedir((DIR *)(uintptr_t)fi->fh);
	return 0;
}

static int sf_statfs(const char *path, struct statvfs *sv)
{
	delay();
	return fstatvfs(source_fd, sv) < 0 ? -errno : 0;
}

static const struct fuse_operations ops = {
	.init = sf_init,
	.destroy = sf_destroy,
	.getattr = sf_getattr,
	.readlink = sf_readlink,
	.access = sf_access,
	.open = sf_open,
	.read = sf_read,
	.release = sf_release,
	.opendir = sf_opendir,
	.readdir = sf_readdir,
	.releasedir = sf_releasedir,
	.statfs = sf_statfs,
};

int main(int argc, char **argv)
{
	struct fuse_args args;
	int rc;

	if (argc < 3 || argv[1][0] == '-') {
		fprintf(stderr,
			"usage: slowfs SOURCE MOUNTPOINT [-o delay_us=N] [-o read_delay_us=N] [-o bw_mib=N]\n"
			"       [-o stats=FILE] [-o stall_uid=N] [FUSE options]\n");
		return 2;
	}
	source_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (source_fd < 0) {
		fprintf(stderr, "slowfs: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	/* Drop SOURCE; the rest is a FUSE command line. */
	argv[1] = argv[0];
	args = (struct fuse_args)FUSE_ARGS_INIT(argc - 1, argv + 1);
	if (fuse_opt_parse(&args, &opts, option_spec, NULL) < 0)
		return 2;
	/* Sleep for the delay asked, not the default 50 us more; worker
	 * threads inherit the slack. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	rc = fuse_main(args.argc, args.argv, &ops, NULL);
	fuse_opt_free_args(&args);
	return rc;
}

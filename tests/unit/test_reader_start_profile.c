/* Start profiles (daemon/reader/start_profile*.c): a profile is parsed as
 * its format says (bad lines skipped, paths that leave the tree refused);
 * what is read through an image with a recorder set is written back as
 * the files' paths and byte ranges, in the order first read; and an image
 * holding /.squash/start-profile gets the parts of the image the profile
 * names into the image file's page cache right after it opens (mincore),
 * while a file the profile does not name stays out; its walk through a
 * mount goes past a FIFO. Skips (77) without mksquashfs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reader/image.h"
#include "reader/start_profile.h"
#include "unit.h"

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- parsing */

struct seen {
	int n;
	char text[1024];
};

static int collect(void *ctx, const struct profile_line *l)
{
	struct seen *s = ctx;
	size_t used = strlen(s->text);

	snprintf(s->text + used, sizeof(s->text) - used, "%llu-%llu:%s;", (unsigned long long)l->from,
		 (unsigned long long)l->to, l->path);
	s->n++;
	return 0;
}

static int parse(const char *text, struct seen *s)
{
	char *buf = strdup(text);
	int r;

	memset(s, 0, sizeof(*s));
	r = start_profile_parse(buf, strlen(buf), collect, s);
	free(buf);
	return r;
}

static void test_parse(void)
{
	struct seen s;

	CHECK_INT(parse("0 10 a\n", &s), -EINVAL); /* no header */
	CHECK_INT(parse("# squash start profile 2\n0 10 a\n", &s), -EINVAL);
	CHECK_INT(parse(START_PROFILE_HEADER "\n"
			"0 10 lib/a.so\n"
			"# a comment\n"
			"5 5 empty\n"          /* FROM < TO */
			"9 3 backwards\n"
			"0 10 /absolute\n"
			"0 10 a/../../etc/shadow\n"
			"0 10 ./a\n"
			"0 10 a//b\n"
			"0 10 dir/\n"
			"x 10 notanumber\n"
			"0 99999999999999999999999 toolarge\n"
			"0 10\n"
			"4096 8192 with space/in name\n"
			"1 2 cut short",
			&s),
		  2);
	CHECK_STR(s.text, "0-10:lib/a.so;4096-8192:with space/in name;");
}

/* ---- an image */

struct image_files {
	char dir[64], img[96], plain[96];
};

/* A tree with two files of 1 MiB (incompressible, so their parts of the
 * image are as large), small files in fragments, and a profile naming one
 * large and one small file. */
static int make_images(struct image_files *f)
{
	char cmd[1024];

	/* Here, the build directory, rather than /tmp: a tmpfs /tmp (as in
	 * some build roots) keeps its pages, which the read-ahead check below
	 * needs to drop. */
	snprintf(f->dir, sizeof(f->dir), "test-start-profile.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->img, sizeof(f->img), "%s/profiled.sqfs", f->dir);
	snprintf(f->plain, sizeof(f->plain), "%s/plain.sqfs", f->dir);
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir -p src/lib src/data; "
		 "head -c 1048576 /dev/urandom >src/lib/wanted.so; "
		 "head -c 1048576 /dev/urandom >src/data/unwanted.bin; "
		 "for i in 1 2 3 4 5; do head -c 3000 /dev/urandom >src/lib/small$i.py; done; "
		 "printf '%%s\\n' '" START_PROFILE_HEADER "' '0 1048576 lib/wanted.so' '0 3000 lib/small3.py' "
		 "'0 10 missing/file' >profile; "
		 "mksquashfs src plain.sqfs -quiet -no-progress -noappend -all-root >/dev/null; "
		 "mksquashfs src profiled.sqfs -quiet -no-progress -noappend -all-root "
		 "-p '.squash d 755 0 0' -p \".squash/start-profile f 644 0 0 cat $PWD/profile\" >/dev/null",
		 f->dir);
	return sh(cmd) == 0 ? 0 : -1;
}

static int lookup(struct image *im, const char *path, struct inode *in)
{
	char copy[256], *save = NULL;
	uint64_t id;
	int r;

	snprintf(copy, sizeof(copy), "%s", path);
	if ((r = inode_get(im, image_root(im), in)) < 0)
		return r;
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save))
		if ((r = dir_lookup(im, in, c, &id)) < 0 || (r = inode_get(im, id, in)) < 0)
			return r;
	return 0;
}

static void read_all(struct image *im, const char *path)
{
	struct inode in;
	struct read_reply r;

	CHECK_INT(lookup(im, path, &in), 0);
	CHECK_INT(file_read(im, &in, 0, (size_t)in.size, &r), 0);
	read_reply_done(im, &r);
}

static void test_record(const struct image_files *f)
{
	int fd = open(f->plain, O_RDONLY);
	struct profile_recorder *rec = profile_recorder_new();
	struct image *im = NULL;
	char err[256], *text = NULL;
	size_t len = 0;
	FILE *out;
	struct inode in;
	struct read_reply r;

	CHECK(rec != NULL);
	CHECK_INT(image_open(fd, 0, 0, &im, err, sizeof(err)), 0);
	if (!im || !rec)
		goto done;
	image_record_profile(im, rec);
	read_all(im, "lib/small2.py");
	/* Part of a file: its range; read again further on: the range grows. */
	CHECK_INT(lookup(im, "data/unwanted.bin", &in), 0);
	CHECK_INT(file_read(im, &in, 4096, 8192, &r), 0);
	read_reply_done(im, &r);
	CHECK_INT(file_read(im, &in, 200000, 100, &r), 0);
	read_reply_done(im, &r);
	read_all(im, "lib/small2.py");
	image_record_profile(im, NULL);
	read_all(im, "lib/small5.py"); /* after recording: not in it */
	out = open_memstream(&text, &len);
	CHECK_INT(profile_recorder_write(rec, im, out, 0), 2);
	fclose(out);
	CHECK_STR(text, START_PROFILE_HEADER "\n"
			"0 3000 lib/small2.py\n"
			"4096 200100 data/unwanted.bin\n");
	free(text);
done:
	image_close(im);
	profile_recorder_free(rec);
	close(fd);
}

/* Pages of [off, off + len) of the file on fd in the page cache. */
static size_t cached(int fd, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t start = off / (uint64_t)pg * (uint64_t)pg, span = off + len - start;
	size_t pages = (size_t)((span + (uint64_t)pg - 1) / (uint64_t)pg), n = 0;
	unsigned char *vec = malloc(pages);
	void *m = mmap(NULL, (size_t)span, PROT_READ, MAP_SHARED, fd, (off_t)start);

	if (m != MAP_FAILED && vec && mincore(m, (size_t)span, vec) == 0)
		for (size_t i = 0; i < pages; i++)
			n += vec[i] & 1;
	if (m != MAP_FAILED)
		munmap(m, (size_t)span);
	free(vec);
	return n;
}

/* Pages the bytes [off, off + len) span. */
static size_t pages_of(uint64_t off, uint64_t len)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);

	return (size_t)((off + len + pg - 1) / pg - off / pg);
}

struct part {
	uint64_t off, len;
};

static void one_part(void *ctx, uint64_t off, uint64_t len)
{
	struct part *p = ctx;

	p->off = off;
	p->len = len;
}

static void test_prefetch(const struct image_files *f)
{
	int fd = open(f->img, O_RDONLY);
	struct image *im = NULL, *probe = NULL;
	struct part wanted = { 0 }, unwanted = { 0 };
	struct inode in;
	char err[256];
	size_t want_pages, got = 0;
	struct timespec pause = { 0, 20 * 1000 * 1000 };

	/* Where the two large files lie, from an image handle of its own. */
	CHECK_INT(image_open(fd, 0, 0, &probe, err, sizeof(err)), 0);
	if (!probe)
		return;
	CHECK_INT(lookup(probe, "lib/wanted.so", &in), 0);
	CHECK_INT(file_extents(probe, &in, 0, in.size, one_part, &wanted), 0);
	CHECK_INT(lookup(probe, "data/unwanted.bin", &in), 0);
	CHECK_INT(file_extents(probe, &in, 0, in.size, one_part, &unwanted), 0);
	image_close(probe);
	CHECK(wanted.len >= 1048576 && unwanted.len >= 1048576);

	/* Nothing of the image cached, then an open: the profile's part comes
	 * in without a read by anyone. */
	fdatasync(fd);
	CHECK_INT(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	if (cached(fd, wanted.off, wanted.len) != 0) {
		UNIT_SKIP("the image's pages cannot be dropped here (a tmpfs?): the read-ahead is not seen");
		close(fd);
		return;
	}
	want_pages = pages_of(wanted.off, wanted.len);
	CHECK_INT(image_open(fd, 0, 0, &im, err, sizeof(err)), 0);
	for (int i = 0; i < 250 && (got = cached(fd, wanted.off, wanted.len)) < want_pages; i++)
		nanosleep(&pause, NULL);
	CHECK(got >= want_pages);
	CHECK_INT(cached(fd, unwanted.off + 65536, unwanted.len - 131072), 0);
	image_close(im);
	close(fd);
}

/* image_close while its prefetch may still run: it is stopped and joined
 * (ASan and valgrind see a use after free otherwise). */
static void test_close_at_once(const struct image_files *f)
{
	for (int i = 0; i < 20; i++) {
		int fd = open(f->img, O_RDONLY);
		struct image *im = NULL;
		char err[256];

		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		CHECK_INT(image_open(fd, 0, 0, &im, err, sizeof(err)), 0);
		image_close(im);
		close(fd);
	}
}

static void walk_hung(int sig)
{
	(void)sig;
	static const char msg[] = "test_walk_skips_a_fifo: the walk did not end (a FIFO waited for)\n";
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

/* The walk through a root whose profiled small file is a FIFO (the image
 * is the user's; the kernel, not the server, opens a FIFO, and would wait
 * for a writer): it goes past it and ends. */
static void test_walk_skips_a_fifo(const struct image_files *f)
{
	char root[512], cmd[2 * sizeof(root) + 64];
	int fd = open(f->img, O_RDONLY);
	struct image *im = NULL;
	char err[256];

	snprintf(root, sizeof(root), "%s/walkroot", f->dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/lib && mkfifo %s/lib/small3.py", root, root);
	CHECK_INT(sh(cmd), 0);
	CHECK_INT(image_open(fd, 0, 0, &im, err, sizeof(err)), 0);
	if (!im)
		return;
	signal(SIGALRM, walk_hung);
	alarm(30);
	start_profile_walk_begin(im, open(root, O_PATH | O_DIRECTORY | O_CLOEXEC));
	start_profile_walk_wait(im);
	alarm(0);
	unit_checks++; /* it ended: the check is that we got here */
	image_close(im);
	close(fd);
}

int main(void)
{
	struct image_files f;
	char cmd[160];

	test_parse();
	if (sh("command -v mksquashfs >/dev/null") != 0) {
		UNIT_SKIP("mksquashfs not installed");
		return unit_exit_code();
	}
	CHECK_INT(make_images(&f), 0);
	test_record(&f);
	test_prefetch(&f);
	test_close_at_once(&f);
	test_walk_skips_a_fifo(&f);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f.dir);
	sh(cmd);
	return unit_exit_code();
}

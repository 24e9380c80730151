/* squash-reader's image layer (daemon/reader/image.c), without FUSE or
 * root: a walk of a real image (made here with mksquashfs) reads back the
 * source tree exactly; then hundreds of corrupted and truncated copies of
 * it are walked and every one ends (errors allowed, never a crash, an
 * out-of-bounds access under ASan, or a hang: an alarm fails the test).
 * Also the range of the image read ahead at open, on hostile superblocks.
 * Skips (77) without mksquashfs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reader/image.h"
#include "reader/image_format.h"
#include "unit.h"

#define WALK_MAX_DEPTH 32
#define WALK_MAX_ENTRIES 20000
#define READ_CAP (4u << 20)

struct walk {
	unsigned entries, errors, files;
	unsigned long long bytes;
	const char *src; /* compare with this tree; NULL: just walk */
	int mismatches;
};

static void check_file(struct walk *w, const char *rel, const unsigned char *data, size_t len)
{
	char path[8192];
	unsigned char *want;
	FILE *f;
	size_t got;

	snprintf(path, sizeof(path), "%s/%s", w->src, rel);
	f = fopen(path, "rb");
	if (!f) {
		w->mismatches++;
		return;
	}
	want = malloc(len + 1);
	got = want ? fread(want, 1, len + 1, f) : 0;
	if (!want || got != len || memcmp(want, data, len)) {
		fprintf(stderr, "content differs: %s\n", rel);
		w->mismatches++;
	}
	free(want);
	fclose(f);
}

static void read_file(struct image *img, struct walk *w, const struct inode *in, const char *rel)
{
	unsigned char *all = w->src ? malloc(in->size + 1) : NULL;
	uint64_t off = 0;

	/* Odd-sized pieces cross block boundaries. */
	while (off < in->size && off < READ_CAP) {
		struct read_reply r;
		size_t at = 0;

		if (file_read(img, in, off, 70001, &r) < 0) {
			w->errors++;
			break;
		}
		if (r.bytes == 0) {
			read_reply_done(img, &r);
			break;
		}
		for (int i = 0; i < r.n; i++) {
			if (all && off + at + r.iov[i].iov_len <= in->size)
				memcpy(all + off + at, r.iov[i].iov_base, r.iov[i].iov_len);
			at += r.iov[i].iov_len;
		}
		w->bytes += r.bytes;
		off += r.bytes;
		read_reply_done(img, &r);
	}
	if (all) {
		if (off == in->size)
			check_file(w, rel, all, in->size);
		else
			w->mismatches++;
		free(all);
	}
}

static void walk_dir(struct image *img, struct walk *w, const struct inode *dir, const char *rel,
		     int depth)
{
	struct dir_iter it;
	struct dir_entry e;
	uint64_t resume = 0;
	int r = 0, n = 0;

	if (depth > WALK_MAX_DEPTH)
		return;
	if (dir_open(img, dir, 0, &it) < 0) {
		w->errors++;
		return;
	}
	while (w->entries < WALK_MAX_ENTRIES && (r = dir_next(img, &it, &e)) > 0) {
		char child[4096];
		struct inode in;
		uint64_t found;

		w->entries++;
		/* Every 7th entry: resume from its cookie, as READDIR does. */
		if (++n % 7 == 0) {
			resume = e.cookie;
			if (dir_open(img, dir, resume, &it) < 0) {
				w->errors++;
				return;
			}
		}
		snprintf(child, sizeof(child), "%s%s%s", rel, *rel ? "/" : "", e.name);
		if (dir_lookup(img, dir, e.name, &found) < 0 || found != e.id) {
			w->errors++;
			if (w->src)
				w->mismatches++;
		}
		if (inode_get(img, e.id, &in) < 0) {
			w->errors++;
			continue;
		}
		if (S_ISDIR(in.mode)) {
			walk_dir(img, w, &in, child, depth + 1);
		} else if (S_ISREG(in.mode)) {
			w->files++;
			read_file(img, w, &in, child);
		} else if (S_ISLNK(in.mode)) {
			char target[4096];

			if (inode_readlink(img, &in, target, sizeof(target)) < 0)
				w->errors++;
		}
	}
	if (r < 0)
		w->errors++;
}

static int walk_image(const char *path, struct walk *w)
{
	struct image *img;
	struct inode root;
	char err[256];
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -1;
	if (image_open(fd, 8, 2, &img, err, sizeof(err)) < 0) {
		close(fd);
		return -1;
	}
	if (inode_get(img, image_root(img), &root) == 0)
		walk_dir(img, w, &root, "", 0);
	else
		w->errors++;
	image_close(img);
	close(fd);
	return 0;
}

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The range image_open asks the kernel to read ahead (md_prefetch_range). */
static void test_prefetch_range(void)
{
	uint64_t off, len;

	md_prefetch_range(1000, 5000, 1 << 20, &off, &len);
	CHECK_INT(off, 1000);
	CHECK_INT(len, 4000);
	/* Capped: the start of the inode table, cap bytes. */
	md_prefetch_range(1000, 5000, 100, &off, &len);
	CHECK_INT(off, 1000);
	CHECK_INT(len, 100);
	md_prefetch_range(0, UINT64_MAX / 2, MD_PREFETCH_MAX, &off, &len);
	CHECK_INT(len, MD_PREFETCH_MAX);
	/* Hostile values: nothing, never a range past the used bytes. */
	md_prefetch_range(5000, 5000, 1 << 20, &off, &len);
	CHECK_INT(len, 0);
	md_prefetch_range(6000, 5000, 1 << 20, &off, &len);
	CHECK_INT(len, 0);
	md_prefetch_range(UINT64_MAX, 5000, 1 << 20, &off, &len);
	CHECK_INT(len, 0);
	md_prefetch_range(0, UINT64_MAX, 1 << 20, &off, &len); /* not an off_t */
	CHECK_INT(len, 0);
	md_prefetch_range(1000, 5000, 0, &off, &len);
	CHECK_INT(len, 0);
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A real image: its tables are read ahead, from the inode table to the end
 * of the used bytes. Then copies with hostile table positions in the
 * superblock: refused at open, nothing read ahead for them. */
static void test_prefetch_image(const char *path, const char *dir)
{
	unsigned char sb[96];
	char bad[256], cmd[600], err[256];
	struct image *img;
	uint64_t inode_start, bytes_used;
	int fd = open(path, O_RDONLY);

	CHECK(fd >= 0);
	if (fd < 0 || pread(fd, sb, sizeof(sb), 0) != (ssize_t)sizeof(sb)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	bytes_used = le64(sb + 40);
	inode_start = le64(sb + 64);
	CHECK_INT(image_open(fd, 0, 0, &img, err, sizeof(err)), 0);
	if (img) {
		CHECK_INT(img->prefetch_off, inode_start);
		CHECK_INT(img->prefetch_len, bytes_used - inode_start);
		CHECK(img->prefetch_len > 0 && img->prefetch_len < bytes_used);
		image_close(img);
	}
	close(fd);

	snprintf(bad, sizeof(bad), "%s/hostile.sqfs", dir);
	for (int k = 0; k < 4; k++) {
		unsigned char h[96];
		FILE *f;

		memcpy(h, sb, sizeof(h));
		if (k == 0) /* inode table past the used bytes */
			put64(h + 64, bytes_used + 4096);
		else if (k == 1) /* inode table at the very end */
			put64(h + 64, UINT64_MAX);
		else if (k == 2) /* used bytes past the file */
			put64(h + 40, UINT64_MAX);
		else /* used bytes before the inode table */
			put64(h + 40, inode_start - 1);
		snprintf(cmd, sizeof(cmd), "cp %s %s", path, bad);
		CHECK_INT(sh(cmd), 0);
		f = fopen(bad, "r+b");
		CHECK(f != NULL);
		if (!f)
			continue;
		CHECK_INT(fwrite(h, 1, sizeof(h), f), sizeof(h));
		fclose(f);
		fd = open(bad, O_RDONLY);
		img = NULL;
		CHECK(image_open(fd, 0, 0, &img, err, sizeof(err)) < 0);
		CHECK(img == NULL);
		close(fd);
	}
	unlink(bad);
}

static void make_tree(const char *dir)
{
	char cmd[8192];

	snprintf(cmd, sizeof(cmd),
		 "set -e; cd %s; mkdir -p tree/many tree/a/b/c; cd tree;"
		 "echo hello > small; : > empty; head -c 131072 /dev/urandom > exact;"
		 "head -c 300001 /dev/urandom > odd; seq 1 60000 > text;"
		 "truncate -s 3000000 sparse; printf x | dd of=sparse bs=1 seek=1500000 conv=notrunc 2>/dev/null;"
		 "ln -s small link; ln -s /no/such/target dangling; ln small hard;"
		 "for i in $(seq 1 700); do echo $i > many/f$i; done; echo deep > a/b/c/x",
		 dir);
	CHECK_INT(sh(cmd), 0);
}

/* Copies src to dst, then damages it: truncation or flipped bytes. */
static void damage(const char *src, const char *dst, unsigned seed)
{
	FILE *f = fopen(src, "rb");
	unsigned char *buf;
	long len;

	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)len);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fclose(f);
		free(buf);
		return;
	}
	fclose(f);
	srand(seed);
	if (seed % 4 == 0) {
		len = 96 + rand() % (len - 96);
	} else {
		int flips = 1 + rand() % 16;

		for (int i = 0; i < flips; i++) {
			/* Mostly the tables at the end (metadata), sometimes the
			 * superblock, sometimes anywhere. */
			long at = seed % 4 == 1 ? rand() % 96 : seed % 4 == 2 ? len - 1 - rand() % (len / 4 + 1)
									       : rand() % len;
			buf[at] ^= (unsigned char)(1 + rand() % 255);
		}
	}
	f = fopen(dst, "wb");
	if (f) {
		fwrite(buf, 1, (size_t)len, f);
		fclose(f);
	}
	free(buf);
}

int main(void)
{
	char dir[] = "/tmp/test-reader-XXXXXX", cmd[16384], img[256], bad[256], src[256];
	const char *formats[] = { "-comp gzip -b 4K", "-comp zstd -b 128K", "-comp xz -b 64K -noI" };
	unsigned runs = getenv("READER_FUZZ_RUNS") ? (unsigned)atoi(getenv("READER_FUZZ_RUNS")) : 150;

	if (sh("command -v mksquashfs >/dev/null") != 0) {
		fprintf(stderr, "SKIP: mksquashfs not installed\n");
		return 77;
	}
	test_prefetch_range();
	if (!mkdtemp(dir))
		return 1;
	make_tree(dir);
	snprintf(src, sizeof(src), "%s/tree", dir);
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		struct walk w = { .src = src };

		snprintf(img, sizeof(img), "%s/img%zu.sqfs", dir, f);
		snprintf(cmd, sizeof(cmd), "mksquashfs %s %s -noappend -quiet -no-progress %s >/dev/null",
			 src, img, formats[f]);
		if (sh(cmd) != 0) {
			fprintf(stderr, "mksquashfs %s unsupported here; skipped\n", formats[f]);
			continue;
		}
		CHECK_INT(walk_image(img, &w), 0);
		CHECK_INT(w.errors, 0);
		CHECK_INT(w.mismatches, 0);
		CHECK_INT(w.files, 708); /* 7 at the top (a hard link counts), 700 in many/, a/b/c/x */
		test_prefetch_image(img, dir);
		fprintf(stderr, "%s: %u entries, %u files, %llu bytes read back exactly\n", formats[f],
			w.entries, w.files, w.bytes);

		/* Damaged copies: each must simply end. */
		alarm(600);
		unsigned opened = 0;
		for (unsigned i = 0; i < runs; i++) {
			struct walk d = { 0 };

			snprintf(bad, sizeof(bad), "%s/bad.sqfs", dir);
			damage(img, bad, i * 7919 + (unsigned)f);
			if (walk_image(bad, &d) == 0)
				opened++;
		}
		alarm(0);
		fprintf(stderr, "%s: %u damaged copies walked (%u opened)\n", formats[f], runs, opened);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
	return unit_exit_code();
}

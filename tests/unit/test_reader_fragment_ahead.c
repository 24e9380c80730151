/* Fragment blocks decompressed ahead (daemon/reader/fragment_ahead.c):
 * reads that step from one fragment block to the next get the block after
 * decompressed by the next image_work_ahead, and the read that needs it
 * takes it without decompressing it again (no data cache miss) and gets
 * the file's own bytes; reads that jump start nothing; threads reading
 * and working ahead at once all get the right bytes. Skips (77) without
 * mksquashfs. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/image_format.h"
#include "reader_test_image.h"
#include "unit.h"

#define FILES 40
#define FILE_BYTES 40000 /* three to a 128 KiB fragment block */

static char dir[64];

static int make_image(void)
{
	return reader_test_make(dir, sizeof(dir), "test-fragment-ahead",
				"mkdir src; "
				"for i in $(seq -w 0 %d); do head -c %d /dev/urandom >src/f$i; done; "
				"mksquashfs src img.sqfs -quiet -no-progress -noappend -all-root >/dev/null",
				FILES - 1, FILE_BYTES);
}

static struct image *open_image(void)
{
	struct image *im = reader_test_open(dir);

	CHECK(im != NULL);
	return im;
}

static int file_inode(struct image *im, int i, struct inode *in)
{
	char name[16];

	snprintf(name, sizeof(name), "f%02d", i);
	return reader_test_lookup(im, name, in);
}

/* Reads file i whole and compares it with its source; 1 when equal. */
static int read_matches(struct image *im, int i)
{
	unsigned char want[FILE_BYTES], got[FILE_BYTES];
	struct read_reply r;
	struct inode in;
	char path[128];
	size_t at = 0;
	FILE *f;
	int same;

	snprintf(path, sizeof(path), "%s/src/f%02d", dir, i);
	if (!(f = fopen(path, "rb")))
		return 0;
	same = fread(want, 1, sizeof(want), f) == sizeof(want);
	fclose(f);
	if (!same || file_inode(im, i, &in) < 0 || file_read(im, &in, 0, FILE_BYTES, &r) < 0)
		return 0;
	for (int k = 0; k < r.n && at + r.iov[k].iov_len <= sizeof(got); k++) {
		memcpy(got + at, r.iov[k].iov_base, r.iov[k].iov_len);
		at += r.iov[k].iov_len;
	}
	same = at == FILE_BYTES && memcmp(got, want, FILE_BYTES) == 0;
	read_reply_done(im, &r);
	return same;
}

/* The first file (by name) whose data is in fragment block frag, or -1. */
static int file_in_fragment(struct image *im, uint32_t frag)
{
	struct inode in;

	for (int i = 0; i < FILES; i++)
		if (file_inode(im, i, &in) == 0 && in.frag == frag)
			return i;
	return -1;
}

static void test_in_order(void)
{
	struct image *im = open_image();
	int a, b, c, d;
	bool more;
	unsigned long misses;

	if (!im)
		return;
	CHECK(im->fragments >= 4);
	a = file_in_fragment(im, 0);
	b = file_in_fragment(im, 1);
	c = file_in_fragment(im, 2);
	CHECK(a >= 0 && b >= 0 && c >= 0);
	if (a < 0 || b < 0 || c < 0)
		goto out;
	/* One block: nothing to go on yet. */
	CHECK(read_matches(im, a));
	image_work_ahead(im);
	CHECK_INT(im->ahead_idx, INVALID_FRAG);
	/* The next block: the one after it is decompressed ahead. */
	CHECK(read_matches(im, b));
	image_work_ahead(im);
	CHECK_INT(im->ahead_idx, 2);
	CHECK_INT(im->ahead_held.used, 1);
	/* ...and taken by the read that needs it, with no miss of its own. */
	misses = im->datac->misses;
	CHECK(read_matches(im, c));
	CHECK_INT(im->datac->misses, misses);
	CHECK_INT(im->ahead_held.used, 0);
	/* Which asked for block 3. */
	image_work_ahead(im);
	CHECK_INT(im->ahead_idx, 3);
	CHECK_INT(im->ahead_held.used, 1);
	/* A reader at rest gives the block held ahead back with its caches
	 * (idle_trim.h): two sweeps with nothing between. The read of block 3
	 * then decompresses it itself. */
	block_cache_sweep_idle(&more);
	block_cache_sweep_idle(&more);
	CHECK_INT(im->ahead_held.used, 0);
	d = file_in_fragment(im, 3);
	CHECK(d >= 0);
	misses = im->datac->misses;
	if (d >= 0)
		CHECK(read_matches(im, d));
	CHECK(im->datac->misses > misses);
out:
	reader_test_close(im);
}

static void test_jump(void)
{
	struct image *im = open_image();
	int a, far;

	if (!im)
		return;
	a = file_in_fragment(im, 0);
	far = file_in_fragment(im, im->fragments - 1);
	CHECK(a >= 0 && far >= 0);
	if (a >= 0 && far >= 0) {
		CHECK(read_matches(im, a));
		CHECK(read_matches(im, far));
		image_work_ahead(im);
		CHECK_INT(im->ahead_want, INVALID_FRAG);
		CHECK_INT(im->ahead_held.used, 0);
		/* Back to the start: a step backwards is no step forward. */
		CHECK(read_matches(im, a));
		image_work_ahead(im);
		CHECK_INT(im->ahead_held.used, 0);
	}
	reader_test_close(im);
}

struct reader_thread {
	struct image *im;
	int start, ok;
};

static void *read_all_in_order(void *arg)
{
	struct reader_thread *t = arg;

	t->ok = 1;
	for (int round = 0; round < 5; round++)
		for (int k = 0; k < FILES; k++) {
			if (!read_matches(t->im, (t->start + k) % FILES))
				t->ok = 0;
			image_work_ahead(t->im);
		}
	return NULL;
}

static void test_threads(void)
{
	struct image *im = open_image();
	struct reader_thread t[4];

	if (!im)
		return;
	for (int i = 0; i < 4; i++)
		t[i] = (struct reader_thread){ .im = im, .start = i * 7 };
	CHECK_INT(reader_test_threads(4, read_all_in_order, t, sizeof(t[0])), 0);
	for (int i = 0; i < 4; i++)
		CHECK(t[i].ok);
	reader_test_close(im);
}

int main(void)
{
	if (!reader_test_have_mksquashfs()) {
		UNIT_SKIP("mksquashfs not installed");
		return unit_exit_code();
	}
	CHECK_INT(make_image(), 0);
	test_in_order();
	test_jump();
	test_threads();
	reader_test_remove(dir);
	return unit_exit_code();
}

/* A large file's data blocks decompressed ahead (daemon/reader/
 * data_ahead.c): once a file's reads go on from one block to the next,
 * image_work_ahead decompresses the block after next into the data cache,
 * and the read that needs it finds it there (no data cache miss) with the
 * file's own bytes; reads that jump, or go to another file, start
 * nothing; threads reading and working ahead at once all get the right
 * bytes. Skips (77) without mksquashfs. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/image_format.h"
#include "reader_test_image.h"
#include "unit.h"

#define BLOCK (128 * 1024)
#define BLOCKS 12
#define FILE_BYTES (BLOCKS * BLOCK + 5000) /* and a tail in a fragment */

static char dir[64];
static unsigned char *want; /* the file's bytes */

/* One large file of compressible bytes (text of random bytes), and
 * another of three blocks. */
static int make_image(void)
{
	char path[128];
	FILE *f;

	if (reader_test_make(dir, sizeof(dir), "test-data-ahead",
			     "mkdir src; head -c %d /dev/urandom | base64 | head -c %d >src/big; "
			     "head -c 300000 /dev/urandom | base64 >src/other; "
			     "mksquashfs src img.sqfs -quiet -no-progress -noappend -all-root -b %d >/dev/null",
			     FILE_BYTES, FILE_BYTES, BLOCK) < 0 ||
	    !(want = malloc(FILE_BYTES)))
		return -1;
	snprintf(path, sizeof(path), "%s/src/big", dir);
	if (!(f = fopen(path, "rb")))
		return -1;
	size_t got = fread(want, 1, FILE_BYTES, f);
	fclose(f);
	return got == FILE_BYTES ? 0 : -1;
}

static struct image *open_image(void)
{
	struct image *im = reader_test_open(dir);

	CHECK(im != NULL);
	return im;
}

/* Reads block k of the big file as the kernel asks for it (128 KiB);
 * 1 when the bytes are the file's. */
static int read_block_matches(struct image *im, const struct inode *in, uint64_t k)
{
	uint64_t off = k * BLOCK;
	size_t len = FILE_BYTES - off < BLOCK ? FILE_BYTES - off : BLOCK, at = 0;
	struct read_reply r;
	int same = 1;

	if (file_read(im, in, off, BLOCK, &r) < 0)
		return 0;
	for (int i = 0; i < r.n; i++) {
		if (at + r.iov[i].iov_len > len || memcmp(r.iov[i].iov_base, want + off + at, r.iov[i].iov_len))
			same = 0;
		at += r.iov[i].iov_len;
	}
	read_reply_done(im, &r);
	return same && at == len;
}

static void test_in_order(void)
{
	struct image *im = open_image();
	struct inode in;
	unsigned long misses;

	if (!im)
		return;
	CHECK_INT(reader_test_lookup(im, "big", &in), 0);
	/* The first read: nothing to go on from yet. */
	CHECK(read_block_matches(im, &in, 0));
	image_work_ahead(im);
	CHECK(im->data_want_pos == 0 && im->data_busy_key == 0);
	/* It goes on: block 1's answer asks for block 3 (the kernel asks
	 * for 2 itself), which the next read of it finds in the cache. */
	CHECK(read_block_matches(im, &in, 1));
	CHECK(im->data_want_pos != 0);
	image_work_ahead(im);
	CHECK(im->data_want_pos == 0);
	CHECK(read_block_matches(im, &in, 2));
	image_work_ahead(im); /* block 4 */
	misses = im->datac->misses;
	CHECK(read_block_matches(im, &in, 3));
	CHECK_INT(im->datac->misses, misses);
	/* And so on to the end, the tail in its fragment included. */
	for (uint64_t k = 4; k <= BLOCKS; k++) {
		image_work_ahead(im);
		misses = im->datac->misses;
		CHECK(read_block_matches(im, &in, k));
		if (k < BLOCKS)
			CHECK_INT(im->datac->misses, misses);
	}
	image_work_ahead(im);
	CHECK(im->data_want_pos == 0);
	reader_test_close(im);
}

static void test_jump(void)
{
	struct image *im = open_image();
	struct inode in, other;

	if (!im)
		return;
	CHECK_INT(reader_test_lookup(im, "big", &in), 0);
	CHECK_INT(reader_test_lookup(im, "other", &other), 0);
	CHECK(read_block_matches(im, &in, 0));
	CHECK(read_block_matches(im, &in, 7)); /* a jump forwards */
	CHECK(im->data_want_pos == 0);
	CHECK(read_block_matches(im, &in, 2)); /* and backwards */
	CHECK(im->data_want_pos == 0);
	/* Another file's blocks between two neighbouring reads: not going on. */
	CHECK(read_block_matches(im, &in, 3));
	CHECK(im->data_want_pos != 0);
	image_work_ahead(im);
	struct read_reply r;
	CHECK(file_read(im, &other, 0, BLOCK, &r) == 0 && r.bytes == BLOCK);
	read_reply_done(im, &r);
	CHECK(read_block_matches(im, &in, 4));
	CHECK(im->data_want_pos == 0);
	reader_test_close(im);
}

struct reader_thread {
	struct image *im;
	struct inode in;
	int ok;
};

static void *read_all_in_order(void *arg)
{
	struct reader_thread *t = arg;

	t->ok = 1;
	for (int round = 0; round < 4; round++)
		for (uint64_t k = 0; k <= BLOCKS; k++) {
			if (!read_block_matches(t->im, &t->in, k))
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
	for (int i = 0; i < 4; i++) {
		t[i] = (struct reader_thread){ .im = im };
		CHECK_INT(reader_test_lookup(im, "big", &t[i].in), 0);
	}
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
	free(want);
	reader_test_remove(dir);
	return unit_exit_code();
}

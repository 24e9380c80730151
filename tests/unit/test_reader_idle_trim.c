/* A reader at rest gives its caches back (daemon/reader/idle_trim.c and
 * the sweep in block_cache.c): a sweep empties each cache nobody used
 * since the previous one and keeps the others, says whether any still
 * holds blocks, and a cache that takes its first block wakes the sweeper.
 * Through the thread, an image read and then left alone ends with empty
 * caches and still reads its own bytes. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "reader/block_cache.h"
#include "reader/idle_trim.h"
#include "reader/image_format.h"
#include "reader_test_image.h"
#include "unit.h"

#define FILE_BYTES 300000 /* two full blocks of 128 KiB and a fragment */

static unsigned filled_calls;

static void count_filled(void)
{
	filled_calls++;
}

static void put(struct block_cache *c, uint64_t key, size_t len)
{
	struct cached_block *b = calloc(1, sizeof(*b) + len);

	if (!b)
		return;
	b->key = key;
	b->len = len;
	b->refs = 1;
	block_cache_release(c, block_cache_put(c, b));
}

static void test_sweep(void)
{
	struct block_cache used, unused, empty;
	struct cached_block *b;
	bool more;

	block_cache_on_filled(count_filled);
	block_cache_init(&used, 4);
	block_cache_init(&unused, 4);
	block_cache_init(&empty, 4);
	put(&used, 1, 100);
	put(&used, 2, 100);
	put(&unused, 1, 30);
	/* The first block of each cache, not the second. */
	CHECK_INT(filled_calls, 2);
	/* Both were used since they were made (their blocks were stored). */
	CHECK_INT(block_cache_sweep_idle(&more), 0);
	CHECK(more);
	b = block_cache_get(&used, 1);
	CHECK(b != NULL);
	/* Held across the sweep: the holder keeps reading it. */
	CHECK_INT(block_cache_sweep_idle(&more), 30);
	CHECK(more);
	CHECK_INT(unused.used, 0);
	CHECK_INT(unused.bytes, 0);
	CHECK_INT(used.used, 2);
	/* Nobody asked since: all of it goes, the held block stays its
	 * holder's until released (ASan sees a use after free otherwise). */
	CHECK_INT(block_cache_sweep_idle(&more), 200);
	CHECK(!more);
	CHECK_INT(used.used, 0);
	if (b) {
		b->data[99] = 1;
		block_cache_release(&used, b);
	}
	CHECK(block_cache_get(&used, 2) == NULL);
	/* Emptied caches wake the sweeper again when refilled. */
	put(&unused, 5, 10);
	CHECK_INT(filled_calls, 3);
	/* A destroyed cache leaves the sweep's list. */
	block_cache_destroy(&unused);
	block_cache_sweep_idle(&more);
	CHECK_INT(block_cache_sweep_idle(&more), 0);
	CHECK(!more);
	block_cache_destroy(&used);
	block_cache_destroy(&empty);
	block_cache_on_filled(NULL);
}

/* The caches' blocks, each under its lock. */
static unsigned held_blocks(struct image *im)
{
	unsigned n = 0;
	struct block_cache *c[2] = { im->mdc, im->datac };

	for (int i = 0; i < 2; i++) {
		pthread_mutex_lock(&c[i]->lock);
		n += c[i]->used;
		pthread_mutex_unlock(&c[i]->lock);
	}
	return n;
}

static void test_image_at_rest(void)
{
	char dir[64];
	struct image *im;
	unsigned left = 1;

	if (reader_test_make(dir, sizeof(dir), "test-idle-trim",
			     "mkdir src; head -c %d /dev/zero | tr '\\0' Q >src/f; "
			     "mksquashfs src img.sqfs -quiet -no-progress -noappend -all-root >/dev/null",
			     FILE_BYTES) < 0) {
		CHECK(!"made the test image");
		return;
	}
	CHECK_INT(idle_trim_start(0), EINVAL);
	CHECK_INT(idle_trim_start(20), 0);
	im = reader_test_open(dir);
	CHECK(im != NULL);
	if (im) {
		CHECK(reader_test_reads_filled(im, "f", FILE_BYTES, 'Q'));
		CHECK(held_blocks(im) > 0);
		/* Emptied one to two intervals after the read; 10 s is the
		 * bound of a machine that is very busy, not the expectation. */
		for (int i = 0; i < 1000 && (left = held_blocks(im)) > 0; i++)
			usleep(10000);
		CHECK_INT(left, 0);
		CHECK(reader_test_reads_filled(im, "f", FILE_BYTES, 'Q'));
		reader_test_close(im);
	}
	idle_trim_stop();
	idle_trim_stop(); /* a second stop does nothing */
	reader_test_remove(dir);
}

int main(void)
{
	test_sweep();
	if (!reader_test_have_mksquashfs())
		UNIT_SKIP("mksquashfs is not installed: the image at rest is not tested");
	else
		test_image_at_rest();
	return unit_exit_code();
}

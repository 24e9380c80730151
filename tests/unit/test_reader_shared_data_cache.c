/* The data cache a reader's single images share (daemon/reader/
 * shared_data_cache.c) and the budget and purge of the block cache under
 * it (block_cache.c). Images of the same layout put their blocks at the
 * same positions: each must read its own bytes while both are open, and
 * an image opened after one closed must never see the closed one's
 * blocks. The cache holds no more bytes than its budget, however many
 * images share it, and a block a request still holds survives eviction
 * until it is released. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/block_cache.h"
#include "reader/image_format.h"
#include "reader/shared_data_cache.h"
#include "reader_test_image.h"
#include "unit.h"

#define FILE_BYTES 300000 /* two full blocks of 128 KiB and a fragment */

static struct cached_block *block(uint64_t key, size_t len)
{
	struct cached_block *b = calloc(1, sizeof(*b) + len);

	if (b) {
		b->key = key;
		b->len = len;
		b->refs = 1;
	}
	return b;
}

static void test_budget_and_purge(void)
{
	struct block_cache c;
	struct cached_block *b, *held;

	block_cache_init_budget(&c, 8, 250);
	for (uint64_t k = 1; k <= 3; k++)
		block_cache_release(&c, block_cache_put(&c, block(k, 100)));
	/* 300 bytes over a budget of 250: the oldest went. */
	CHECK_INT(c.used, 2);
	CHECK_INT(c.bytes, 200);
	CHECK(block_cache_get(&c, 1) == NULL);
	held = block_cache_get(&c, 2);
	CHECK(held != NULL);
	/* A block larger than the budget is kept alone; the held one leaves
	 * the cache but stays readable for its holder. */
	block_cache_release(&c, block_cache_put(&c, block(4, 400)));
	CHECK_INT(c.used, 1);
	CHECK_INT(c.bytes, 400);
	CHECK(block_cache_get(&c, 2) == NULL);
	if (held) {
		CHECK_INT(held->key, 2);
		held->data[99] = 1; /* still its holder's (ASan would see a free) */
		block_cache_release(&c, held);
	}
	/* The next block pushes the large one out; purge takes the
	 * matching keys only. */
	block_cache_release(&c, block_cache_put(&c, block(0x10, 10)));
	CHECK(block_cache_get(&c, 4) == NULL);
	block_cache_release(&c, block_cache_put(&c, block(0x21, 10)));
	block_cache_purge(&c, 0xf0, 0x20);
	CHECK(block_cache_get(&c, 0x21) == NULL);
	b = block_cache_get(&c, 0x10);
	CHECK(b != NULL);
	block_cache_release(&c, b);
	CHECK_INT(c.bytes, 10);
	CHECK_INT(c.used, 1);
	block_cache_destroy(&c);
}

static void test_tags(void)
{
	const uint32_t tags = 1u << (64 - CACHE_TAG_SHIFT);
	uint64_t *got = calloc(tags, sizeof(*got)), t;
	struct block_cache *cache;
	uint32_t n = 0;

	if (!got)
		return;
	/* Every tag but 0 once, then none: the image keeps its own cache. */
	while (n < tags && shared_data_cache_join(&cache, &got[n]) == 0)
		n++;
	CHECK_INT(n, tags - 1);
	for (uint32_t i = 0; i < n; i++)
		CHECK(got[i] != 0 && (got[i] & ((1ull << CACHE_TAG_SHIFT) - 1)) == 0);
	/* A tag given back is given again, without the blocks it had. */
	block_cache_release(cache, block_cache_put(cache, block(got[7] | 4096, 64)));
	shared_data_cache_leave(got[7]);
	CHECK_INT(shared_data_cache_join(&cache, &t), 0);
	CHECK_INT(t, got[7]);
	CHECK(block_cache_get(cache, got[7] | 4096) == NULL);
	CHECK_INT(shared_data_cache_join(&cache, &t), -1);
	for (uint32_t i = 0; i < n; i++)
		shared_data_cache_leave(got[i]);
	free(got);
}

static void test_images_of_one_layout(void)
{
	char dir[3][64];
	struct image *im[3] = { NULL, NULL, NULL };

	for (int i = 0; i < 3; i++)
		if (reader_test_make(dir[i], sizeof(dir[i]), "test-shared-data",
				     "mkdir src; head -c %d /dev/zero | tr '\\0' '%c' >src/f; "
				     "mksquashfs src img.sqfs -quiet -no-progress -noappend -all-root "
				     ">/dev/null",
				     FILE_BYTES, 'A' + i) < 0) {
			CHECK(!"made the test images");
			return;
		}
	im[0] = reader_test_open(dir[0]);
	im[1] = reader_test_open(dir[1]);
	CHECK(im[0] && im[1]);
	if (im[0] && im[1]) {
		CHECK(im[0]->data_shared && im[1]->data_shared);
		CHECK(im[0]->datac == im[1]->datac);
		CHECK(im[0]->cache_tag != im[1]->cache_tag);
		for (int round = 0; round < 3; round++) {
			CHECK(reader_test_reads_filled(im[0], "f", FILE_BYTES, 'A'));
			CHECK(reader_test_reads_filled(im[1], "f", FILE_BYTES, 'B'));
		}
		/* Within the budget, whatever the images. */
		CHECK(im[0]->datac->bytes <= SHARED_DATA_CACHE_BYTES);
		reader_test_close(im[0]);
		im[0] = NULL;
		/* The closed image's blocks left with it. */
		im[2] = reader_test_open(dir[2]);
		CHECK(im[2] != NULL);
		if (im[2]) {
			CHECK(reader_test_reads_filled(im[2], "f", FILE_BYTES, 'C'));
			CHECK(reader_test_reads_filled(im[1], "f", FILE_BYTES, 'B'));
		}
	}
	for (int i = 0; i < 3; i++) {
		if (im[i])
			reader_test_close(im[i]);
		reader_test_remove(dir[i]);
	}
}

int main(void)
{
	test_budget_and_purge();
	test_tags();
	if (!reader_test_have_mksquashfs())
		UNIT_SKIP("mksquashfs is not installed: images of one layout not tested");
	else
		test_images_of_one_layout();
	return unit_exit_code();
}

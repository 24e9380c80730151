/* Fragment blocks decompressed ahead of a reader going through them in
 * order.
 *
 * mksquashfs packs small files and files' tails into fragment blocks in
 * the order it packs files (directory order, or a start profile's), so a
 * client reading a tree in that order (md5sum of every file, an import
 * from an image packed in its start's order) goes from one fragment block
 * to the next, each shared by several files. Each block's first read
 * waited for its decompression: for md5sum of the bench's stack that is
 * half of the reader's CPU time, all of it on the client's path. Once the
 * reads step from one block to the next, the block after is decompressed
 * by the thread that has just answered, after its answer, while the
 * client works through the files it got, on another CPU.
 *
 * One block at a time, held aside until a read takes it: in the data
 * cache (an image's own has 4 slots) a large file's blocks would evict it
 * before its use. It waits in a cache of one slot, so that a reader at
 * rest gives it back with the rest (idle_trim.h).
 * Reads that jump (an import from a plain image, a lookup here and there)
 * start nothing, so a random reader pays no CPU for it. */
#include "config.h"

#include "reader/fragment_ahead.h"

#include <stdlib.h>

#include "reader/image_format.h"

void fragment_ahead_init(struct image *img)
{
	pthread_mutex_init(&img->ahead_lock, NULL);
	pthread_cond_init(&img->ahead_done, NULL);
	img->ahead_last = INVALID_FRAG;
	img->ahead_want = INVALID_FRAG;
	img->ahead_busy = INVALID_FRAG;
	img->ahead_idx = INVALID_FRAG;
	block_cache_init(&img->ahead_held, 1);
}

void fragment_ahead_destroy(struct image *img)
{
	block_cache_destroy(&img->ahead_held);
	pthread_cond_destroy(&img->ahead_done);
	pthread_mutex_destroy(&img->ahead_lock);
}

struct cached_block *fragment_ahead_take(struct image *img, uint32_t idx, uint64_t pos,
					 uint32_t hdr)
{
	struct cached_block *b = NULL;

	pthread_mutex_lock(&img->ahead_lock);
	/* Decompressing it twice would only cost another CPU's time.
	 * INVALID_FRAG is "none", never a block to wait for. */
	while (idx != INVALID_FRAG && img->ahead_busy == idx)
		pthread_cond_wait(&img->ahead_done, &img->ahead_lock);
	if (idx != INVALID_FRAG && img->ahead_idx == idx) {
		/* Out of the holder, into the caller's hands (NULL if the idle
		 * sweep took it). */
		b = block_cache_get(&img->ahead_held, pos | img->cache_tag);
		block_cache_purge(&img->ahead_held, 0, 0);
		img->ahead_idx = INVALID_FRAG;
	}
	if (idx != img->ahead_last) {
		if (img->ahead_last != INVALID_FRAG && idx == img->ahead_last + 1 &&
		    idx + 1 < img->fragments)
			img->ahead_want = idx + 1;
		img->ahead_last = idx;
	}
	pthread_mutex_unlock(&img->ahead_lock);
	if (!b)
		return NULL;
	if (b->next != hdr) {
		block_cache_release(&img->ahead_held, b);
		return NULL;
	}
	return block_cache_put(img->datac, b);
}

void fragment_ahead_work(struct image *img)
{
	struct cached_block *b = NULL;
	unsigned char e[16];
	uint32_t idx;

	pthread_mutex_lock(&img->ahead_lock);
	idx = img->ahead_want;
	if (idx == INVALID_FRAG || img->ahead_busy != INVALID_FRAG || img->ahead_idx == idx) {
		pthread_mutex_unlock(&img->ahead_lock);
		return;
	}
	img->ahead_want = INVALID_FRAG;
	img->ahead_busy = idx;
	pthread_mutex_unlock(&img->ahead_lock);

	if (table_entry(img, img->frag_start, idx, sizeof(e), e) == 0) {
		uint64_t pos = le64(e);
		struct cached_block *cached = block_cache_get(img->datac, pos | img->cache_tag);

		/* A read that got there first has it in the cache already. */
		if (cached)
			block_cache_release(img->datac, cached);
		else if (data_block_decompress(img, pos, le32(e + 8), 0, &b) < 0)
			b = NULL;
	}

	pthread_mutex_lock(&img->ahead_lock);
	if (b) {
		/* Takes the place of the one held before, if any. */
		block_cache_release(&img->ahead_held, block_cache_put(&img->ahead_held, b));
		img->ahead_idx = idx;
	}
	img->ahead_busy = INVALID_FRAG;
	pthread_cond_broadcast(&img->ahead_done);
	pthread_mutex_unlock(&img->ahead_lock);
}

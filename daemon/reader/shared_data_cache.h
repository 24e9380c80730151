/* The data cache all of a reader's single images share (a union's images
 * share one of their own, union_reader.c). A reader serves one user's
 * mounts, so its budget is per user, not per mount: a job's images get
 * room for the blocks a start comes back to (a fragment block holds the
 * .pyc files of a whole package, imported one at a time between others),
 * and a user's 256 mounts cost no more than one. */
#ifndef SQUASH_READER_SHARED_DATA_CACHE_H
#define SQUASH_READER_SHARED_DATA_CACHE_H

#include <stdint.h>

#include "reader/block_cache.h"

/* Decompressed data blocks held at most: 32 blocks of 128 KiB. A cold
 * import of the full stack decompresses 1,929 blocks (1,329 distinct)
 * with 4 per image, 1,653 with 16, 1,561 with 32, 1,472 with 64
 * (docs/performance.md, section 23). */
#define SHARED_DATA_CACHE_BYTES (4u << 20)

/* A tag for an image's keys in the shared cache (already shifted to
 * CACHE_TAG_SHIFT) and the cache: 0, or -1 when every tag is taken (the
 * image then keeps a cache of its own). */
int shared_data_cache_join(struct block_cache **cache, uint64_t *tag);

/* The image of tag is closing: its blocks leave the cache, and the tag
 * is free for another image. */
void shared_data_cache_leave(uint64_t tag);

#endif

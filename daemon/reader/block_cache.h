/* A small thread-safe cache of decompressed squashfs blocks (metadata or
 * data), shared by all of the reader's threads.
 *
 * Blocks are reference counted: a reader thread holds the ones it is
 * copying from (or replying from, with an iovec) while other threads evict
 * and fill slots, so no copy happens under the lock. The slot count is
 * small on purpose: the kernel keeps file pages and entries cached for
 * ever (keep_cache, infinite timeouts), so this cache only has to bridge
 * neighbouring requests (a fragment block shared by many small files, the
 * metadata block a walk is in), and idle mounts must stay cheap (PSS per
 * mount, docs/performance.md). */
#ifndef SQUASH_READER_BLOCK_CACHE_H
#define SQUASH_READER_BLOCK_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cached_block {
	uint64_t key;        /* position of the block in the image */
	uint64_t next;       /* metadata blocks: position of the following block */
	size_t len;          /* bytes of data */
	unsigned refs;       /* the cache's own reference + one per holder */
	unsigned char data[];
};

#define BLOCK_CACHE_MAX_SLOTS 64

struct block_cache {
	pthread_mutex_t lock;
	unsigned nslots, used;
	size_t max_bytes;    /* 0: only the slots bound it */
	size_t bytes;        /* the len of the blocks it holds */
	struct cached_block *slot[BLOCK_CACHE_MAX_SLOTS]; /* most recently used first */
	unsigned long hits, misses;
	unsigned long stored;      /* blocks put */
	unsigned long swept_at;    /* hits + misses + stored at the last idle sweep */
	struct block_cache *older, *newer; /* every cache, for the idle sweep */
};

void block_cache_init(struct block_cache *c, unsigned nslots);

/* As block_cache_init, and the blocks it holds also stay within max_bytes
 * (their len; the newest block is kept whatever its size). */
void block_cache_init_budget(struct block_cache *c, unsigned nslots, size_t max_bytes);

/* Drops the blocks whose key has (key & mask) == value: an image that
 * leaves a shared cache takes its blocks with it. Holders keep theirs
 * until they release them. */
void block_cache_purge(struct block_cache *c, uint64_t mask, uint64_t value);
void block_cache_destroy(struct block_cache *c);

/* The block at key with one reference for the caller, or NULL. */
struct cached_block *block_cache_get(struct block_cache *c, uint64_t key);

/* Offers a block just read (holding one reference, the caller's). Returns
 * the block to use, with one reference for the caller: b itself, now also
 * held by the cache, or one another thread inserted meanwhile (b is then
 * freed). */
struct cached_block *block_cache_put(struct block_cache *c, struct cached_block *b);

void block_cache_release(struct block_cache *c, struct cached_block *b);

/* The idle sweep (idle_trim.h): drops every block of each cache that was
 * neither asked for a block nor given one since the previous sweep. Returns the bytes it
 * dropped; *more: some cache still holds blocks (sweep again later). */
size_t block_cache_sweep_idle(bool *more);

/* fn is called, outside any cache's lock, each time a cache that held no
 * block takes one: the sweep has something to look at again. */
void block_cache_on_filled(void (*fn)(void));

#endif

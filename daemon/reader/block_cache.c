#include "config.h"

#include "reader/block_cache.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Every cache of the process, newest first, for the idle sweep. Lock
 * order: all_lock, then a cache's lock. */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block_cache *newest;
static void (*_Atomic filled_hook)(void);

void block_cache_init(struct block_cache *c, unsigned nslots)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->nslots = nslots < 1 ? 1 : nslots > BLOCK_CACHE_MAX_SLOTS ? BLOCK_CACHE_MAX_SLOTS : nslots;
	pthread_mutex_lock(&all_lock);
	c->older = newest;
	if (newest)
		newest->newer = c;
	newest = c;
	pthread_mutex_unlock(&all_lock);
}

void block_cache_init_budget(struct block_cache *c, unsigned nslots, size_t max_bytes)
{
	block_cache_init(c, nslots);
	c->max_bytes = max_bytes;
}

void block_cache_destroy(struct block_cache *c)
{
	pthread_mutex_lock(&all_lock);
	if (c->older)
		c->older->newer = c->newer;
	if (c->newer)
		c->newer->older = c->older;
	else
		newest = c->older;
	pthread_mutex_unlock(&all_lock);
	for (unsigned i = 0; i < c->nslots; i++)
		free(c->slot[i]);
	pthread_mutex_destroy(&c->lock);
}

/* Lock held: moves slot i to the front. */
static void to_front(struct block_cache *c, unsigned i)
{
	struct cached_block *b = c->slot[i];

	memmove(&c->slot[1], &c->slot[0], i * sizeof(c->slot[0]));
	c->slot[0] = b;
}

struct cached_block *block_cache_get(struct block_cache *c, uint64_t key)
{
	struct cached_block *b = NULL;

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < c->nslots && c->slot[i]; i++) {
		if (c->slot[i]->key == key) {
			b = c->slot[i];
			b->refs++;
			to_front(c, i);
			break;
		}
	}
	if (b)
		c->hits++;
	else
		c->misses++;
	pthread_mutex_unlock(&c->lock);
	return b;
}

/* Lock held: takes the last slot's block out of the cache; returns it when
 * nobody holds it any more (the caller frees it, after the lock). */
static struct cached_block *evict_last(struct block_cache *c)
{
	struct cached_block *last = c->slot[--c->used];

	c->slot[c->used] = NULL;
	c->bytes -= last->len;
	return --last->refs == 0 ? last : NULL; /* else a holder frees it on release */
}

struct cached_block *block_cache_put(struct block_cache *c, struct cached_block *b)
{
	struct cached_block *evicted[BLOCK_CACHE_MAX_SLOTS];
	unsigned n_evicted = 0;
	bool was_empty;
	void (*hook)(void);

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < c->nslots && c->slot[i]; i++) {
		if (c->slot[i]->key == b->key) {
			struct cached_block *other = c->slot[i];

			other->refs++;
			to_front(c, i);
			pthread_mutex_unlock(&c->lock);
			free(b);
			return other;
		}
	}
	/* Room for b: a slot, and within the budget, oldest out first. */
	while (c->used > 0 &&
	       (c->used == c->nslots || (c->max_bytes && c->bytes + b->len > c->max_bytes))) {
		struct cached_block *gone = evict_last(c);

		if (gone)
			evicted[n_evicted++] = gone;
	}
	was_empty = c->used == 0;
	c->stored++;
	memmove(&c->slot[1], &c->slot[0], c->used * sizeof(c->slot[0]));
	b->refs++; /* the cache's */
	c->slot[0] = b;
	c->used++;
	c->bytes += b->len;
	pthread_mutex_unlock(&c->lock);
	while (n_evicted > 0)
		free(evicted[--n_evicted]);
	if (was_empty && (hook = atomic_load(&filled_hook)))
		hook();
	return b;
}

void block_cache_purge(struct block_cache *c, uint64_t mask, uint64_t value)
{
	struct cached_block *gone[BLOCK_CACHE_MAX_SLOTS];
	unsigned n_gone = 0, kept = 0;

	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < c->used; i++) {
		struct cached_block *b = c->slot[i];

		if ((b->key & mask) != value) {
			c->slot[kept++] = b;
			continue;
		}
		c->bytes -= b->len;
		if (--b->refs == 0)
			gone[n_gone++] = b;
	}
	for (unsigned i = kept; i < c->used; i++)
		c->slot[i] = NULL;
	c->used = kept;
	pthread_mutex_unlock(&c->lock);
	while (n_gone > 0)
		free(gone[--n_gone]);
}

void block_cache_release(struct block_cache *c, struct cached_block *b)
{
	int gone;

	if (!b)
		return;
	pthread_mutex_lock(&c->lock);
	gone = --b->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (gone)
		free(b);
}

size_t block_cache_sweep_idle(bool *more)
{
	size_t dropped = 0;

	*more = false;
	pthread_mutex_lock(&all_lock);
	for (struct block_cache *c = newest; c; c = c->older) {
		unsigned long activity;
		size_t bytes;
		bool idle;

		pthread_mutex_lock(&c->lock);
		activity = c->hits + c->misses + c->stored;
		idle = activity == c->swept_at && c->used > 0;
		c->swept_at = activity;
		bytes = c->bytes;
		if (c->used > 0 && !idle)
			*more = true;
		pthread_mutex_unlock(&c->lock);
		/* A cache in use keeps its blocks; one that nobody used since
		 * the last sweep gives them all back (the kernel keeps the pages
		 * and entries that were read, so few are asked for again). */
		if (idle) {
			block_cache_purge(c, 0, 0);
			dropped += bytes;
		}
	}
	pthread_mutex_unlock(&all_lock);
	return dropped;
}

void block_cache_on_filled(void (*fn)(void))
{
	atomic_store(&filled_hook, fn);
}

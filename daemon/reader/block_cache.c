#include "config.h"

#include "reader/block_cache.h"

#include <stdlib.h>
#include <string.h>

void block_cache_init(struct block_cache *c, unsigned nslots)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->nslots = nslots < 1 ? 1 : nslots > BLOCK_CACHE_MAX_SLOTS ? BLOCK_CACHE_MAX_SLOTS : nslots;
}

void block_cache_destroy(struct block_cache *c)
{
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

struct cached_block *block_cache_put(struct block_cache *c, struct cached_block *b)
{
	struct cached_block *evicted = NULL;
	unsigned last = c->nslots - 1;

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
	if (c->slot[last]) {
		evicted = c->slot[last];
		c->slot[last] = NULL;
		if (--evicted->refs > 0)
			evicted = NULL; /* a holder frees it on release */
	}
	memmove(&c->slot[1], &c->slot[0], last * sizeof(c->slot[0]));
	b->refs++; /* the cache's */
	c->slot[0] = b;
	pthread_mutex_unlock(&c->lock);
	free(evicted);
	return b;
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

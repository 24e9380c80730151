/* The data cache a reader's single images share (shared_data_cache.h). */
#include "config.h"

#include "reader/shared_data_cache.h"

#include <pthread.h>
#include <stdbool.h>

#include "reader/image_format.h"

/* Tags 1 to TAGS - 1; 0 is "no tag" (an image's own cache). */
#define TAGS (1u << (64 - CACHE_TAG_SHIFT))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool ready;
static struct block_cache cache;
static uint64_t taken[TAGS / 64];
static uint32_t next_tag = 1;

int shared_data_cache_join(struct block_cache **out, uint64_t *tag)
{
	int r = -1;

	pthread_mutex_lock(&lock);
	if (!ready) {
		block_cache_init_budget(&cache, BLOCK_CACHE_MAX_SLOTS, SHARED_DATA_CACHE_BYTES);
		taken[0] |= 1; /* tag 0 */
		ready = true;
	}
	/* Round robin from the last one given: a tag just freed is the last
	 * to come back. */
	for (uint32_t n = 0; n < TAGS; n++) {
		uint32_t t = (next_tag + n) % TAGS;

		if (taken[t / 64] & (1ull << (t % 64)))
			continue;
		taken[t / 64] |= 1ull << (t % 64);
		next_tag = (t + 1) % TAGS;
		*tag = (uint64_t)t << CACHE_TAG_SHIFT;
		*out = &cache;
		r = 0;
		break;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

void shared_data_cache_leave(uint64_t tag)
{
	uint32_t t = (uint32_t)(tag >> CACHE_TAG_SHIFT);

	if (t == 0 || t >= TAGS)
		return;
	/* Its blocks go before the tag is free: a new image with the same
	 * tag must never find them. */
	block_cache_purge(&cache, ~((1ull << CACHE_TAG_SHIFT) - 1), tag);
	pthread_mutex_lock(&lock);
	taken[t / 64] &= ~(1ull << (t % 64));
	pthread_mutex_unlock(&lock);
}

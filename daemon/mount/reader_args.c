/* A pooled squash-reader's command line (reader_args.h). */
#include "config.h"

#include "mount/reader_args.h"

#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int poll_us = -1; /* main.c sets both from the settings */
static char profile_cache[PROFILE_CACHE_TEMPLATE_MAX + 1];

void reader_args_set(int us, const char *cache)
{
	pthread_mutex_lock(&lock);
	poll_us = us;
	snprintf(profile_cache, sizeof(profile_cache), "%s", cache ? cache : "");
	pthread_mutex_unlock(&lock);
}

void reader_args_fill(struct reader_args *a)
{
	int n = 0;

	/* argv[0] is the name every FUSE server squashd starts has, which
	 * sites' NHC process checks ignore (docs/admin.md). */
	a->argv[n++] = (char *)"squashfuse_ll";
	a->argv[n++] = (char *)"--serve";
	a->argv[n++] = (char *)"/dev/fd/3";
	pthread_mutex_lock(&lock);
	if (poll_us >= 0) {
		snprintf(a->poll, sizeof(a->poll), "%d", poll_us);
		a->argv[n++] = (char *)"--poll-us";
		a->argv[n++] = a->poll;
	}
	/* The template as it is: the reader expands it as the user, so that
	 * squashd never looks into a user's home (docs/architecture.md). */
	if (profile_cache[0]) {
		snprintf(a->cache, sizeof(a->cache), "%s", profile_cache);
		a->argv[n++] = (char *)"--profile-cache";
		a->argv[n++] = a->cache;
	}
	pthread_mutex_unlock(&lock);
	a->argv[n] = NULL;
}

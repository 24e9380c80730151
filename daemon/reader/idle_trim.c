/* The idle sweep's thread (idle_trim.h). */
#include "config.h"

#include "reader/idle_trim.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include "reader/block_cache.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t wake_once = PTHREAD_ONCE_INIT;
static pthread_cond_t wake; /* on CLOCK_MONOTONIC; never destroyed: a worker may still signal it */
static pthread_t thread;
static bool running, stopping, filled;
static unsigned interval;

/* block_cache_on_filled: a cache took its first block. */
static void cache_filled(void)
{
	pthread_mutex_lock(&lock);
	if (!filled) {
		filled = true;
		pthread_cond_signal(&wake);
	}
	pthread_mutex_unlock(&lock);
}

/* Lock held: waits one interval; false when stopping. */
static bool wait_interval(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += interval / 1000;
	t.tv_nsec += (long)(interval % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	while (!stopping && pthread_cond_timedwait(&wake, &lock, &t) != ETIMEDOUT)
		;
	return !stopping;
}

static void *sweeper(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		bool more = true;

		while (!filled && !stopping)
			pthread_cond_wait(&wake, &lock);
		/* Sweeps until every cache is empty; a cache filled meanwhile
		 * sets filled again. */
		while (more && wait_interval()) {
			filled = false;
			pthread_mutex_unlock(&lock);
			/* The freed blocks of 128 KiB are unmapped as they go
			 * (main.c's mmap threshold); the metadata blocks and the
			 * rest leave holes in the heap that only a trim returns. */
			if (block_cache_sweep_idle(&more) > 0)
				malloc_trim(0);
			pthread_mutex_lock(&lock);
		}
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void wake_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
}

int idle_trim_start(unsigned interval_ms)
{
	sigset_t all, old;
	int r;

	if (interval_ms == 0 || running)
		return EINVAL;
	pthread_once(&wake_once, wake_init);
	interval = interval_ms;
	stopping = false;
	filled = false;
	/* Signals are the main thread's (as for the workers). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&thread, NULL, sweeper, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return r;
	running = true;
	block_cache_on_filled(cache_filled);
	return 0;
}

void idle_trim_stop(void)
{
	if (!running)
		return;
	block_cache_on_filled(NULL);
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
	pthread_join(thread, NULL);
	running = false;
}

#include "config.h"

#include "util/close_detached.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "util/log.h"

static void *close_it(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

void close_detached(int fd)
{
	pthread_attr_t attr;
	pthread_t t;

	if (fd < 0)
		return;
	if (pthread_attr_init(&attr) == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 64 * 1024);
		bool started = pthread_create(&t, &attr, close_it, (void *)(intptr_t)fd) == 0;
		pthread_attr_destroy(&attr);
		if (started)
			return;
	}
	log_warning("cannot start a thread to close descriptor %d (it may wait for a user's FUSE server); keeping it",
		    fd);
}

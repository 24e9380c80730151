#include "config.h"

#include "util/close_detached.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/log.h"

/* The closes running, one node each: few (they end in microseconds
 * unless a file system hangs, and then image_work_left.h bounds them). */
struct running_close {
	struct running_close *next;
	uid_t owner;
	int fd;
};

static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static struct running_close *running;

static void unlist(struct running_close *c)
{
	pthread_mutex_lock(&running_lock);
	for (struct running_close **p = &running; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	pthread_mutex_unlock(&running_lock);
}

static void *close_it(void *arg)
{
	struct running_close *c = arg;

	close(c->fd);
	unlist(c);
	free(c);
	return NULL;
}

void close_detached(uid_t owner, int fd)
{
	pthread_attr_t attr;
	pthread_t t;
	struct running_close *c;

	if (fd < 0)
		return;
	if ((c = malloc(sizeof(*c))) && pthread_attr_init(&attr) == 0) {
		*c = (struct running_close){ .owner = owner, .fd = fd };
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 64 * 1024);
		/* Listed first: the thread may end before pthread_create returns. */
		pthread_mutex_lock(&running_lock);
		c->next = running;
		running = c;
		pthread_mutex_unlock(&running_lock);
		bool started = pthread_create(&t, &attr, close_it, c) == 0;
		pthread_attr_destroy(&attr);
		if (started)
			return;
		unlist(c);
	}
	free(c);
	log_warning("cannot start a thread to close descriptor %d (it may wait for a user's FUSE server); keeping it",
		    fd);
}

unsigned close_detached_running(uid_t owner)
{
	unsigned n = 0;

	pthread_mutex_lock(&running_lock);
	for (struct running_close *c = running; c; c = c->next)
		n += c->owner == owner;
	pthread_mutex_unlock(&running_lock);
	return n;
}

size_t close_detached_running_each(struct close_detached_use *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&running_lock);
	for (struct running_close *c = running; c; c = c->next) {
		size_t k = 0;

		while (k < n && out[k].owner != c->owner)
			k++;
		if (k < n)
			out[k].running++;
		else if (n < max)
			out[n++] = (struct close_detached_use){ .owner = c->owner, .running = 1 };
	}
	pthread_mutex_unlock(&running_lock);
	return n;
}

/* Calls a request may give up on (deadline_call.h). */
#include "config.h"

#include "util/deadline_call.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"

struct deadline_job {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	void (*call)(void *arg);
	void (*late)(void *arg);
	void (*release)(void *arg);
	void *arg;
	bool done, abandoned;
	int refs; /* the thread's and the waiter's */
};

static void unref(struct deadline_job *j)
{
	pthread_mutex_lock(&j->lock);
	bool last = --j->refs == 0;
	pthread_mutex_unlock(&j->lock);
	if (!last)
		return;
	pthread_cond_destroy(&j->done_cond);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

static void *run(void *p)
{
	struct deadline_job *j = p;

	j->call(j->arg);
	pthread_mutex_lock(&j->lock);
	j->done = true;
	bool abandoned = j->abandoned;
	pthread_cond_signal(&j->done_cond);
	pthread_mutex_unlock(&j->lock);
	if (abandoned) {
		if (j->late)
			j->late(j->arg);
		if (j->release)
			j->release(j->arg);
	}
	unref(j);
	return NULL;
}

int deadline_call(void (*call)(void *arg), void (*late)(void *arg), void (*release)(void *arg),
		  void *arg, long long deadline_ms)
{
	struct deadline_job *j = calloc(1, sizeof(*j));
	pthread_condattr_t ca;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (!j)
		return -1;
	pthread_mutex_init(&j->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->done_cond, &ca);
	pthread_condattr_destroy(&ca);
	j->call = call;
	j->late = late;
	j->release = release;
	j->arg = arg;
	j->refs = 2;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, run, j);
	pthread_attr_destroy(&attr);
	if (rc) {
		pthread_cond_destroy(&j->done_cond);
		pthread_mutex_destroy(&j->lock);
		free(j);
		errno = rc;
		return -1;
	}
	pthread_mutex_lock(&j->lock);
	while (!j->done) {
		long long left = deadline_ms - squash_now_ms();
		struct timespec until;

		if (left <= 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += left / 1000;
		until.tv_nsec += (left % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&j->done_cond, &j->lock, &until);
	}
	bool done = j->done;
	if (!done)
		j->abandoned = true;
	pthread_mutex_unlock(&j->lock);
	unref(j);
	return done ? 1 : 0;
}

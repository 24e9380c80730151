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
	unsigned owner;
	struct deadline_job *next_given_up; /* on given_up while abandoned and running */
};

/* The calls given up on that still run, a list through the jobs
 * themselves: counting them never needs memory that could run out. It is
 * as long as the calls that hang, at most limit per owner. */
static pthread_mutex_t given_up_lock = PTHREAD_MUTEX_INITIALIZER;
static struct deadline_job *given_up;

static unsigned given_up_of_locked(unsigned owner)
{
	unsigned n = 0;

	for (const struct deadline_job *j = given_up; j; j = j->next_given_up)
		n += j->owner == owner;
	return n;
}

static void given_up_remove(struct deadline_job *j)
{
	pthread_mutex_lock(&given_up_lock);
	for (struct deadline_job **p = &given_up; *p; p = &(*p)->next_given_up)
		if (*p == j) {
			*p = j->next_given_up;
			break;
		}
	pthread_mutex_unlock(&given_up_lock);
}

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
		given_up_remove(j);
	}
	unref(j);
	return NULL;
}

unsigned deadline_calls_given_up(unsigned owner)
{
	pthread_mutex_lock(&given_up_lock);
	unsigned n = given_up_of_locked(owner);
	pthread_mutex_unlock(&given_up_lock);
	return n;
}

size_t deadline_calls_given_up_each(struct deadline_owner_use *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&given_up_lock);
	for (const struct deadline_job *j = given_up; j; j = j->next_given_up) {
		size_t k = 0;

		while (k < n && out[k].owner != j->owner)
			k++;
		if (k < n)
			out[k].given_up++;
		else if (n < max)
			out[n++] = (struct deadline_owner_use){ .owner = j->owner, .given_up = 1 };
	}
	pthread_mutex_unlock(&given_up_lock);
	return n;
}

int deadline_call(unsigned owner, unsigned limit, void (*call)(void *arg), void (*late)(void *arg),
		  void (*release)(void *arg), void *arg, long long deadline_ms)
{
	struct deadline_job *j;
	pthread_condattr_t ca;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	/* Checked before the call, counted when it is given up on: calls of
	 * one owner running at once (bounded by its requests served at once,
	 * max_requests_per_user) may pass the limit together. */
	if (limit && deadline_calls_given_up(owner) >= limit) {
		errno = EBUSY;
		return -1;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -1;
	j->owner = owner;
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
	if (!done) {
		/* Listed before the thread can see it abandoned, so it is
		 * listed when the thread takes it off. */
		j->abandoned = true;
		pthread_mutex_lock(&given_up_lock);
		j->next_given_up = given_up;
		given_up = j;
		pthread_mutex_unlock(&given_up_lock);
	}
	pthread_mutex_unlock(&j->lock);
	unref(j);
	return done ? 1 : 0;
}

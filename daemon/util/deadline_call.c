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
	bool given_up; /* abandoned, as the list sees it (calls_lock) */
	struct deadline_job *next_running; /* on running until its call returns */
};

/* The calls that run, a list through the jobs themselves: counting them
 * never needs memory that could run out. It is as long as the calls in
 * flight, at most limit per owner with a limit. calls_ended is
 * broadcast when one leaves it. */
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t calls_ended;
static pthread_once_t calls_once = PTHREAD_ONCE_INIT;
static struct deadline_job *running;

static void calls_init(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&calls_ended, &ca);
	pthread_condattr_destroy(&ca);
}

/* owner's calls running, and of them those given up on (calls_lock). */
static unsigned running_of_locked(unsigned owner, unsigned *given_up)
{
	unsigned n = 0, g = 0;

	for (const struct deadline_job *j = running; j; j = j->next_running)
		if (j->owner == owner) {
			n++;
			g += j->given_up;
		}
	if (given_up)
		*given_up = g;
	return n;
}

static void running_remove(struct deadline_job *j)
{
	pthread_mutex_lock(&calls_lock);
	for (struct deadline_job **p = &running; *p; p = &(*p)->next_running)
		if (*p == j) {
			*p = j->next_running;
			break;
		}
	pthread_cond_broadcast(&calls_ended);
	pthread_mutex_unlock(&calls_lock);
}

/* The monotonic time deadline_ms names, for a timed wait. */
static struct timespec until_ms(long long deadline_ms)
{
	long long left = deadline_ms - squash_now_ms();
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	if (left < 0)
		left = 0;
	until.tv_sec += left / 1000;
	until.tv_nsec += (left % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	return until;
}

/* Takes one of owner's limit places (0: no bound) and lists j there:
 * false (errno EBUSY) when all are taken by calls given up on, or still
 * by calls in flight at deadline_ms. */
static bool running_add(struct deadline_job *j, unsigned owner, unsigned limit, long long deadline_ms)
{
	unsigned given_up;
	bool ok = true;

	pthread_once(&calls_once, calls_init);
	pthread_mutex_lock(&calls_lock);
	while (limit && running_of_locked(owner, &given_up) >= limit) {
		/* Calls given up on wait on a server that did not answer:
		 * no place frees soon. */
		if (given_up >= limit || squash_now_ms() >= deadline_ms) {
			ok = false;
			break;
		}
		struct timespec until = until_ms(deadline_ms);
		pthread_cond_timedwait(&calls_ended, &calls_lock, &until);
	}
	if (ok) {
		j->next_running = running;
		running = j;
	}
	pthread_mutex_unlock(&calls_lock);
	if (!ok)
		errno = EBUSY;
	return ok;
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
	}
	/* Its place is free once what it made is undone. */
	running_remove(j);
	unref(j);
	return NULL;
}

unsigned deadline_calls_given_up(unsigned owner)
{
	unsigned given_up;

	pthread_mutex_lock(&calls_lock);
	running_of_locked(owner, &given_up);
	pthread_mutex_unlock(&calls_lock);
	return given_up;
}

unsigned deadline_calls_running(unsigned owner)
{
	pthread_mutex_lock(&calls_lock);
	unsigned n = running_of_locked(owner, NULL);
	pthread_mutex_unlock(&calls_lock);
	return n;
}

size_t deadline_calls_given_up_each(struct deadline_owner_use *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&calls_lock);
	for (const struct deadline_job *j = running; j; j = j->next_running) {
		size_t k = 0;

		if (!j->given_up)
			continue;
		while (k < n && out[k].owner != j->owner)
			k++;
		if (k < n)
			out[k].given_up++;
		else if (n < max)
			out[n++] = (struct deadline_owner_use){ .owner = j->owner, .given_up = 1 };
	}
	pthread_mutex_unlock(&calls_lock);
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

	j = calloc(1, sizeof(*j));
	if (!j)
		return -1;
	j->owner = owner;
	/* A place taken before the thread starts: an owner never has more
	 * than limit threads in these calls, however many ask at once. */
	if (!running_add(j, owner, limit, deadline_ms)) {
		free(j);
		return -1;
	}
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
		running_remove(j);
		pthread_cond_destroy(&j->done_cond);
		pthread_mutex_destroy(&j->lock);
		free(j);
		errno = rc;
		return -1;
	}
	pthread_mutex_lock(&j->lock);
	while (!j->done && squash_now_ms() < deadline_ms) {
		struct timespec until = until_ms(deadline_ms);
		pthread_cond_timedwait(&j->done_cond, &j->lock, &until);
	}
	bool done = j->done;
	if (!done) {
		/* Marked while the thread cannot finish (j->lock held), so it
		 * is still listed. */
		j->abandoned = true;
		pthread_mutex_lock(&calls_lock);
		j->given_up = true;
		pthread_mutex_unlock(&calls_lock);
	}
	pthread_mutex_unlock(&j->lock);
	unref(j);
	return done ? 1 : 0;
}

/* Users' work on users' threads (daemon/process/user_executor.c): one
 * user's work that blocks never delays another's, one user's work runs in
 * order, threads end when their user has no work left, and each user's
 * busy time is counted. */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "process/user_executor.h"
#include "unit.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool release_blocked;
static int order[8], done;

/* A user's slow callback: a teardown waiting on a stopped reader. */
static void blocked(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!release_blocked)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

static void record(void *arg)
{
	pthread_mutex_lock(&lock);
	order[done++] = (int)(long)arg;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Waits until n pieces of work were recorded, at most ms. */
static bool wait_done(int n, long long ms)
{
	long long deadline = squash_now_ms() + ms;
	bool ok;

	for (;;) {
		pthread_mutex_lock(&lock);
		ok = done >= n;
		pthread_mutex_unlock(&lock);
		if (ok || squash_now_ms() >= deadline)
			return ok;
		usleep(1000);
	}
}

/* uid's row of user_executor_usage (squashctl status's watcher rows). */
static struct user_executor_use use_of(uid_t uid)
{
	struct user_executor_use use[8];
	size_t n = user_executor_usage(use, 8);

	for (size_t i = 0; i < n; i++)
		if (use[i].uid == uid)
			return use[i];
	return (struct user_executor_use){ 0 };
}

int main(void)
{
	/* User 1001 is stuck; its next work waits behind it. */
	CHECK_INT(user_executor_run(1001, blocked, NULL), 0);
	CHECK_INT(user_executor_run(1001, record, (void *)1001L), 0);
	/* User 1002's work runs at once meanwhile, in order. */
	for (long i = 0; i < 3; i++)
		CHECK_INT(user_executor_run(1002, record, (void *)(2000 + i)), 0);
	CHECK(wait_done(3, 5000));
	CHECK_INT(order[0], 2000);
	CHECK_INT(order[1], 2001);
	CHECK_INT(order[2], 2002);
	usleep(100 * 1000);
	pthread_mutex_lock(&lock);
	CHECK_INT(done, 3); /* 1001's second piece still waits for its first */
	/* What status shows of 1001 meanwhile: its one thread, two pieces. */
	CHECK_INT(use_of(1001).threads, 1);
	CHECK_INT(use_of(1001).queued, 2);
	release_blocked = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	CHECK(wait_done(4, 5000));
	CHECK_INT(order[3], 1001);
	/* Idle users' threads end; the time 1001's work took is its own. */
	CHECK_INT(user_executor_drain(squash_now_ms() + 5000), 0);
	CHECK_INT(user_executor_threads(), 0);
	CHECK(use_of(1001).busy_ms >= 90);
	CHECK(use_of(1002).busy_ms < 90);
	CHECK_INT(use_of(1001).threads, 0);
	CHECK_INT(use_of(1001).queued, 0);
	CHECK_INT(use_of(1001).done, 2);
	return unit_exit_code();
}

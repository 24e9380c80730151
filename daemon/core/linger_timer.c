#include "config.h"
#include "core/linger_timer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "core/owner_teardown.h"
#include "core/sharing.h"
#include "process/user_executor.h"
#include "registry/linger.h"
#include "util/log.h"

static pthread_t thread;
static bool started;

/* Unmounting waits on the mount's reader (up to request_timeout when it
 * is stopped): each owner's expired mounts go to that owner's thread
 * (core/owner_teardown.h), so one user's stopped reader never holds up
 * another's expiry. At shutdown (stopping) squashd waits for them here. */
static void tear_down_by_owner(struct daemon_state *ds, struct mount_entry *expired, bool stopping)
{
	const struct squashd_config *cfg = settings_hold();
	struct teardown td = TEARDOWN_INIT(cfg);

	td.head = expired;
	if (stopping)
		sharing_teardown(ds, &td);
	else
		owners_teardown(ds, &td);
	settings_drop(cfg);
}

static void *expiry_loop(void *arg)
{
	struct daemon_state *ds = arg;

	pthread_mutex_lock(&ds->lock);
	for (;;) {
		struct mount_entry *expired = NULL;
		long long next = linger_collect(&ds->registry, ds->stopping, squash_now_ms(), &expired);
		bool stopping = ds->stopping;

		if (expired) {
			pthread_mutex_unlock(&ds->lock);
			tear_down_by_owner(ds, expired, stopping);
			pthread_mutex_lock(&ds->lock);
			continue; /* the registry changed meanwhile */
		}
		if (stopping)
			break;
		if (!next) {
			pthread_cond_wait(&ds->changed, &ds->lock);
		} else {
			/* ds->changed uses CLOCK_MONOTONIC (daemon_init). */
			struct timespec ts;
			long long wait_ms = next - squash_now_ms();
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if (wait_ms > 0) {
				long long ns = ts.tv_nsec + wait_ms * 1000000LL;
				ts.tv_sec += ns / 1000000000LL;
				ts.tv_nsec = ns % 1000000000LL;
				pthread_cond_timedwait(&ds->changed, &ds->lock, &ts);
			}
		}
	}
	pthread_mutex_unlock(&ds->lock);
	return NULL;
}

int linger_timer_start(struct daemon_state *ds)
{
	int rc = pthread_create(&thread, NULL, expiry_loop, ds);
	if (rc != 0) {
		log_error("cannot start the linger thread: %s", strerror(rc));
		return -1;
	}
	started = true;
	return 0;
}

/* Teardowns under way on users' threads (and releases after a process's
 * exit) end before squashd saves its state and exits. */
#define DRAIN_MS 10000

void linger_timer_finish(void)
{
	if (started)
		pthread_join(thread, NULL);
	started = false;
	unsigned left = user_executor_drain(squash_now_ms() + DRAIN_MS);
	if (left)
		log_warning("stopping with %u teardown(s) or release(s) of users still under way", left);
}

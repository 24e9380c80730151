#include "config.h"
#include "core/linger_timer.h"

#include <string.h>
#include <time.h>

#include "clock.h"
#include "core/sharing.h"
#include "registry/linger.h"
#include "util/log.h"

static pthread_t thread;
static bool started;

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
			const struct squashd_config *cfg = settings_hold();
			struct teardown td = TEARDOWN_INIT(cfg);
			td.head = expired;
			sharing_teardown(ds, &td);
			settings_drop(cfg);
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

void linger_timer_finish(void)
{
	if (started)
		pthread_join(thread, NULL);
	started = false;
}

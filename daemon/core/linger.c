#include "config.h"
#include "core/linger.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "clock.h"
#include "util/log.h"

static pthread_t thread;
static bool started;

bool linger_begin_locked(struct daemon_state *ds, struct mount_entry *m)
{
	/* A reload may change it at any time (reload.c). */
	unsigned linger_s = __atomic_load_n(&ds->cfg->linger_s, __ATOMIC_RELAXED);

	if (linger_s == 0 || ds->stopping)
		return false;
	m->state = MOUNT_LINGERING;
	m->linger_until_ms = squash_now_ms() + (long long)linger_s * 1000;
	log_info("mount of image %s at %s lingers for %u s", m->image, m->mount_point, linger_s);
	/* The expiry thread may sleep past the new deadline otherwise. */
	pthread_cond_broadcast(&ds->changed);
	return true;
}

void linger_take_over_locked(struct daemon_state *ds, struct mount_entry *m)
{
	(void)ds;
	log_info("reusing lingering mount of image %s at %s (%u s left)", m->image, m->mount_point,
		 linger_left_s(m, squash_now_ms()));
	m->state = MOUNT_READY;
	m->linger_until_ms = 0;
}

unsigned linger_left_s(const struct mount_entry *m, long long now_ms)
{
	if (m->state != MOUNT_LINGERING || m->linger_until_ms <= now_ms)
		return 0;
	return (unsigned)((m->linger_until_ms - now_ms + 999) / 1000);
}

time_t linger_expiry_wall(const struct mount_entry *m)
{
	long long left_ms = m->linger_until_ms - squash_now_ms();
	return time(NULL) + (left_ms > 0 ? (time_t)((left_ms + 999) / 1000) : 0);
}

void linger_restore(struct mount_entry *m, time_t expiry_wall)
{
	time_t left = expiry_wall - time(NULL);
	/* A wall clock set back must not stretch it beyond the maximum. */
	if (left > SQUASHD_LINGER_MAX_S)
		left = SQUASHD_LINGER_MAX_S;
	m->state = MOUNT_LINGERING;
	m->linger_until_ms = squash_now_ms() + (left > 0 ? (long long)left * 1000 : 0);
}

/* Moves expired (or, when stopping, all) lingering mounts to td; returns
 * the earliest remaining expiry, or 0 when none lingers. Lock held. */
static long long collect_locked(struct daemon_state *ds, struct teardown *td, long long now)
{
	long long next = 0;

	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next) {
		if (m->state != MOUNT_LINGERING)
			continue;
		if (ds->stopping || m->linger_until_ms <= now) {
			log_info("linger of image %s at %s %s", m->image, m->mount_point,
				 ds->stopping ? "ends: squashd stops" : "expired");
			m->state = MOUNT_UNMOUNTING;
			m->teardown_next = td->head;
			td->head = m;
		} else if (!next || m->linger_until_ms < next) {
			next = m->linger_until_ms;
		}
	}
	return next;
}

static void *expiry_loop(void *arg)
{
	struct daemon_state *ds = arg;

	pthread_mutex_lock(&ds->lock);
	for (;;) {
		struct teardown td = { NULL };
		long long next = collect_locked(ds, &td, squash_now_ms());
		bool stopping = ds->stopping;

		if (td.head) {
			pthread_mutex_unlock(&ds->lock);
			job_mounts_teardown(ds, &td);
			pthread_mutex_lock(&ds->lock);
			continue; /* the registry changed meanwhile */
		}
		if (stopping)
			break;
		if (!next) {
			pthread_cond_wait(&ds->changed, &ds->lock);
		} else {
			/* ds->changed uses CLOCK_MONOTONIC (job_mounts_init). */
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

int linger_start(struct daemon_state *ds)
{
	int rc = pthread_create(&thread, NULL, expiry_loop, ds);
	if (rc != 0) {
		log_error("cannot start the linger thread: %s", strerror(rc));
		return -1;
	}
	started = true;
	return 0;
}

void linger_finish(void)
{
	if (started)
		pthread_join(thread, NULL);
	started = false;
}

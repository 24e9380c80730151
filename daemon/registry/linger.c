#include "config.h"
#include "registry/linger.h"

#include "settings/settings.h"
#include "util/log.h"

bool linger_begin(struct mount_entry *m, unsigned linger_s, long long now_ms)
{
	if (linger_s == 0)
		return false;
	m->state = MOUNT_LINGERING;
	m->linger_until_ms = now_ms + (long long)linger_s * 1000;
	log_info("mount of image %s at %s lingers for %u s", m->image, m->mount_point, linger_s);
	return true;
}

void linger_take_over(struct mount_entry *m, long long now_ms)
{
	log_info("reusing lingering mount of image %s at %s (%u s left)", m->image, m->mount_point,
		 linger_left_s(m, now_ms));
	m->state = MOUNT_READY;
	m->linger_until_ms = 0;
}

unsigned linger_left_s(const struct mount_entry *m, long long now_ms)
{
	if (m->state != MOUNT_LINGERING || m->linger_until_ms <= now_ms)
		return 0;
	return (unsigned)((m->linger_until_ms - now_ms + 999) / 1000);
}

time_t linger_expiry_wall(const struct mount_entry *m, long long now_ms, time_t now_wall)
{
	long long left_ms = m->linger_until_ms - now_ms;
	return now_wall + (left_ms > 0 ? (time_t)((left_ms + 999) / 1000) : 0);
}

void linger_restore(struct mount_entry *m, time_t expiry_wall, long long now_ms, time_t now_wall)
{
	time_t left = expiry_wall - now_wall;
	/* A wall clock set back must not stretch it beyond the maximum. */
	if (left > SQUASHD_LINGER_MAX_S)
		left = SQUASHD_LINGER_MAX_S;
	m->state = MOUNT_LINGERING;
	m->linger_until_ms = now_ms + (left > 0 ? (long long)left * 1000 : 0);
}

long long linger_collect(struct registry *r, bool all, long long now_ms,
			 struct mount_entry **expired)
{
	long long next = 0;

	for (struct mount_entry *m = r->mounts; m; m = m->next) {
		if (m->state != MOUNT_LINGERING)
			continue;
		if (all || m->linger_until_ms <= now_ms) {
			log_info("linger of image %s at %s %s", m->image, m->mount_point,
				 all ? "ends: squashd stops" : "expired");
			m->state = MOUNT_UNMOUNTING;
			m->teardown_next = *expired;
			*expired = m;
		} else if (!next || m->linger_until_ms < next) {
			next = m->linger_until_ms;
		}
	}
	return next;
}

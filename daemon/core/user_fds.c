#include "config.h"
#include "core/user_fds.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "core/sharing.h"
#include "mount/fuse_keep.h"

/* Users with a mount request in progress: at most one entry per worker. */
#define RESERVING_MAX 1024

static pthread_mutex_t reserve_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uid_t uid;
	uint64_t fds;
} reserving[RESERVING_MAX];
static size_t n_reserving;

struct held {
	uint64_t fds, mounts;
};

/* What m holds in squashd, and for whom (lock held); false: nobody's. */
static bool held_by(const struct mount_entry *m, uid_t *uid, uint64_t *fds)
{
	if (m->key.mode != SQUASH__MOUNT_MODE__FUSE || m->key.owner_uid == MOUNT_OWNER_ANY ||
	    m->key.owner_uid == 0 || m->state == MOUNT_FAILED)
		return false;
	*uid = m->key.owner_uid;
	*fds = (m->server_pidfd >= 0) + (m->keep ? 1 + m->keep->n_images : 0);
	return true;
}

static void held_locked(struct daemon_state *ds, uid_t uid, struct held *h)
{
	h->fds = h->mounts = 0;
	for (const struct mount_entry *m = sharing_next_mount_locked(ds, NULL); m;
	     m = sharing_next_mount_locked(ds, m)) {
		uid_t owner;
		uint64_t fds;
		if (held_by(m, &owner, &fds) && owner == uid) {
			h->fds += fds;
			h->mounts++;
		}
	}
}

uint64_t user_fds_limit(const struct squashd_config *cfg)
{
	struct rlimit rl;

	if (cfg->max_fds_per_user)
		return cfg->max_fds_per_user;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return (uint64_t)rl.rlim_cur / USER_FDS_DEFAULT_DIVISOR;
}

/* uid's entry (reserve_lock held); added when absent and add. */
static size_t reserving_entry(uid_t uid, bool add)
{
	size_t i;

	for (i = 0; i < n_reserving && reserving[i].uid != uid; i++)
		;
	if (i == n_reserving && add && n_reserving < RESERVING_MAX) {
		reserving[i].uid = uid;
		reserving[i].fds = 0;
		n_reserving++;
	}
	return i;
}

bool user_fds_reserve(struct daemon_state *ds, const struct squashd_config *cfg, uid_t uid,
		      unsigned n_images, uint64_t *reserved, char *err, size_t errlen)
{
	uint64_t limit = user_fds_limit(cfg), cost = (uint64_t)n_images * USER_FDS_PER_NEW_MOUNT;
	struct held h;

	*reserved = 0;
	if (uid == 0 || limit == 0 || n_images == 0)
		return true;
	pthread_mutex_lock(&ds->lock);
	held_locked(ds, uid, &h);
	pthread_mutex_unlock(&ds->lock);
	pthread_mutex_lock(&reserve_lock);
	size_t i = reserving_entry(uid, true);
	uint64_t pending = i < n_reserving ? reserving[i].fds : 0;
	bool ok = i < n_reserving && h.fds + pending + cost <= limit;
	if (ok) {
		reserving[i].fds += cost;
		*reserved = cost;
	} else if (i < n_reserving && reserving[i].fds == 0) {
		reserving[i] = reserving[--n_reserving];
	}
	pthread_mutex_unlock(&reserve_lock);
	if (!ok)
		snprintf(err, errlen, "squashd on this node holds %llu descriptors for the %llu mounts of uid %u "
			 "(and %llu for mounts being made); %u more image(s) would pass max_fds_per_user = %llu "
			 "(%u descriptors a mount): end some of that user's jobs or sessions first",
			 (unsigned long long)h.fds, (unsigned long long)h.mounts, (unsigned)uid,
			 (unsigned long long)pending, n_images, (unsigned long long)limit,
			 USER_FDS_PER_NEW_MOUNT);
	return ok;
}

void user_fds_unreserve(uid_t uid, uint64_t reserved)
{
	if (reserved == 0)
		return;
	pthread_mutex_lock(&reserve_lock);
	size_t i = reserving_entry(uid, false);
	if (i < n_reserving) {
		reserving[i].fds -= reserved < reserving[i].fds ? reserved : reserving[i].fds;
		if (reserving[i].fds == 0)
			reserving[i] = reserving[--n_reserving];
	}
	pthread_mutex_unlock(&reserve_lock);
}

/* A mount squashd holds descriptors for, for a user (lock held). */
static bool holds_fds(const struct mount_entry *m)
{
	uid_t uid;
	uint64_t fds;

	return held_by(m, &uid, &fds);
}

void user_fds_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
			  user_budget_emit emit, void *arg)
{
	uint64_t limit = user_fds_limit(cfg);
	uid_t *uids;

	/* The users holding mounts, each once; then their sums. */
	pthread_mutex_lock(&ds->lock);
	size_t n = registry_mount_owners(&ds->registry, holds_fds, &uids);
	for (size_t i = 0; i < n; i++) {
		struct held h;
		held_locked(ds, uids[i], &h);
		emit(arg, uids[i], "descriptors", h.fds, limit);
		emit(arg, uids[i], "mounts", h.mounts, limit / USER_FDS_PER_NEW_MOUNT);
	}
	pthread_mutex_unlock(&ds->lock);
	free(uids);
}

#include "config.h"
#include "core/merged_budget.h"

#include <stdio.h>

/* Held by a holder, or being made for one. */
static bool merged_in_use(const struct mount_entry *m)
{
	return m->key.mode == MOUNT_MODE_MERGED && (m->state == MOUNT_MOUNTING || m->state == MOUNT_READY);
}

unsigned merged_mounts_of_user_locked(struct daemon_state *ds, uid_t uid)
{
	return registry_user_mounts(&ds->registry, uid, merged_in_use);
}

bool merged_mounts_user_refuses_locked(struct daemon_state *ds, const struct squashd_config *cfg, uid_t uid,
				       char *why, size_t whylen)
{
	unsigned limit = cfg->max_merged_mounts_per_user, held;

	if (uid == 0 || limit == 0 || (held = merged_mounts_of_user_locked(ds, uid)) < limit)
		return false;
	snprintf(why, whylen, "the jobs and sessions of uid %u on this node already hold %u merged mounts "
		 "(images merged at one target; max_merged_mounts_per_user = %u): end some of that user's "
		 "jobs or sessions first", (unsigned)uid, held, limit);
	return true;
}

/* One user's share of the merged mounts (core/merge.h): each is an
 * overlayfs mount in the node's mount table whose lowers it pins, made
 * for a job's, step's or session's images at one target. Without a
 * budget one user's jobs and sessions (up to 512 groups each) could fill
 * the node's mount table and memory for everyone. */
#ifndef SQUASHD_MERGED_BUDGET_H
#define SQUASHD_MERGED_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/daemon.h"
#include "settings/settings.h"

/* The distinct merged mounts uid's jobs, steps and sessions hold, and
 * those being made for uid (lock held); shared ones count for each
 * holder, lingering ones for nobody. */
unsigned merged_mounts_of_user_locked(struct daemon_state *ds, uid_t uid);

/* Whether a new merged mount for uid (root: never) must be refused
 * because uid holds max_merged_mounts_per_user already; why says so
 * (lock held: the caller records the mount it makes, mounting_for = uid,
 * under the same hold). Sharing a merged mount that exists is never
 * refused. */
bool merged_mounts_user_refuses_locked(struct daemon_state *ds, const struct squashd_config *cfg, uid_t uid,
				       char *why, size_t whylen);

#endif

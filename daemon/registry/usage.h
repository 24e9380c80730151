/* What one user costs the registry: their jobs, steps and sessions, and
 * the bytes their records take in the state file as written (escaping
 * included: a byte of a path becomes up to STATE_FILE_ESCAPE_MAX). Every
 * save copies and writes all of it, so each user has a budget
 * (squashd.conf registry_entries_per_user, registry_bytes_per_user): one
 * user's many steps or long non-ASCII paths cannot make every user's saves
 * slow; over budget, that user's next image is refused, nobody else's. */
#ifndef SQUASHD_REGISTRY_USAGE_H
#define SQUASHD_REGISTRY_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "registry/registry.h"

struct registry_usage {
	size_t entries; /* jobs, steps and sessions (pending ones included) */
	size_t bytes;   /* their records in the state file, as written */
	size_t session_binds; /* images their squash-shell sessions bind on the node (core/sessions.h) */
};

/* uid's usage now (lock held; caches each entry's bytes until it
 * changes: registry.c). For squashctl status too. Changes made outside
 * registry.c (an overlay's paths) are counted at the entry's next change. */
struct registry_usage registry_user_usage(struct registry *r, uid_t uid);

/* Calls fn once per user holding entries, in uid order, with that
 * user's usage (lock held; for squashctl status's per-user budgets).
 * Returns 0, or -1 when out of memory (nothing called). */
typedef void (*registry_usage_fn)(void *arg, uid_t uid, struct registry_usage usage);
int registry_usage_each_user(struct registry *r, registry_usage_fn fn, void *arg);

/* Whether uid may add image/target to its entry (lock held): 0, or -1
 * with why (naming the setting) when that would put uid over a budget. */
int registry_user_admit(struct registry *r, uid_t uid, const char *image, const char *target,
			size_t max_entries, unsigned long long max_bytes, char *why, size_t len);

/* Whether a session of uid may bind one more image (lock held): 0, or -1
 * with why (naming the setting) when uid's sessions bind max already (0:
 * no bound). Each bind is an entry of the node's mount table, copied into
 * every namespace that receives /run's mounts and walked by every reader
 * of /proc/PID/mountinfo on the node. */
int registry_user_admit_session_bind(struct registry *r, uid_t uid, size_t max, char *why, size_t len);

/* Whether m, whose last holder just went, may linger (lock held): a
 * user's own image mount (FUSE, key.owner_uid, not root) lingers only
 * while that user's entries (the one letting it go included) and
 * lingering mounts stay within max_entries and their records within
 * max_bytes, since a lingering mount's record is
 * written with every save and no holder's budget counts it. Past that it
 * is unmounted at once (a cache given up, not an error). Other mounts
 * (kernel, merged) are bounded by the loop devices and their lowers. */
bool registry_user_may_linger(struct registry *r, const struct mount_entry *m, size_t max_entries,
			      unsigned long long max_bytes);

/* registry_job_add_image, keeping e's counted bytes up to date (the new
 * record's added) rather than to be counted again. 0 or -1. */
int registry_user_add_image(struct job_entry *e, const char *image, const char *target,
			    struct mount_entry *m);

#endif

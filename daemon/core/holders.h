/* The holders of node-level mounts and their entries in the registry: a
 * job (registry.jobs; its prolog mounted its images), one of its steps
 * with images of its own, or a squash-shell session (registry.scoped).
 * Adding an image to a holder goes through the sharing engine; dropping a
 * holder lets go of its references (and a job's overlays, a session's
 * binds). Releasing a job always takes its steps with it. */
#ifndef SQUASHD_HOLDERS_H
#define SQUASHD_HOLDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/daemon.h"
#include "util/result.h"

/* Finding and adding holders (lock held). A new holder is pending: its
 * mount request is at work, and a second request for it waits or is
 * refused. NULL when out of memory. */
struct job_entry *holders_find_job_locked(struct daemon_state *ds, uint32_t job_id);
struct job_entry *holders_add_job_locked(struct daemon_state *ds, uint32_t job_id, uid_t uid);
struct job_entry *holders_find_step_locked(struct daemon_state *ds, uint32_t job_id,
					   uint32_t step_id);
/* A step's own images, asked for by its slurmstepd asker (pid, and its
 * start time, 0 when unknown: then its death is not watched). */
struct job_entry *holders_add_step_locked(struct daemon_state *ds, uint32_t job_id,
					  uint32_t step_id, uid_t uid, pid_t asker,
					  unsigned long long asker_start);
struct job_entry *holders_find_session_locked(struct daemon_state *ds, pid_t pid);
struct job_entry *holders_add_session_locked(struct daemon_state *ds, uid_t uid, pid_t pid,
					     unsigned long long start);
/* How many squash-shell sessions uid holds. */
unsigned holders_sessions_of_locked(const struct daemon_state *ds, uid_t uid);

/* squash-shell sessions a user may hold at once on a node (root: no
 * limit): each pins mounts and a watcher slot while its process lives. */
#define HOLDERS_SESSIONS_PER_USER 32

/* The holder after prev (NULL: the first): jobs, then steps and sessions;
 * with m, only those that use m (lock held). For describing the state. */
const struct job_entry *holders_next_locked(const struct daemon_state *ds,
					    const struct job_entry *prev,
					    const struct mount_entry *m);

/* The end of e's mount request (lock held): e is no longer pending, and
 * waiters are woken when the lock is let go. */
void holders_settle_locked(struct daemon_state *ds, struct job_entry *e);

/* A job whose mount request failed (lock held): lets go of its overlays
 * (to td) and mounts, and keeps it with status and why, so its steps can
 * tell the user; its release (or gc) removes it. */
void holders_fail_job_locked(struct daemon_state *ds, struct job_entry *job, Squash__Status status,
			     const char *why, struct teardown *td);

/* Mounts or shares the images of e (pending, unlocked) as uid, skipping
 * those marked in skip (may be NULL), and records each in e. A step's or
 * session's image may not be writable (overlays belong to a job's prolog
 * and release). On failure err says why; e keeps what it got so far. */
enum result holders_mount_images(struct daemon_state *ds, const struct squashd_config *cfg,
				 struct job_entry *e, uid_t uid, Squash__ImageSpec *const *images,
				 size_t n, const bool *skip, char *err, size_t errlen,
				 long long deadline_ms);

/* Drops e's references and e itself (lock held): a job's overlays go to
 * td, a session's binds are undone. */
void holders_drop_locked(struct daemon_state *ds, struct job_entry *e, struct teardown *td);

/* What became of an entry asked to be released. */
enum holder_release { HOLDER_RELEASED, HOLDER_UNKNOWN, HOLDER_PENDING };

/* Releases job_id (lock held): its entry unless still pending, and every
 * step entry of it that is not pending. Saves when anything went. */
enum holder_release holders_release_job_locked(struct daemon_state *ds, uint32_t job_id,
					       struct teardown *td);

/* Releases step job_id.step_id's own images (lock held). Saves. */
enum holder_release holders_release_step_locked(struct daemon_state *ds, uint32_t job_id,
						uint32_t step_id, struct teardown *td);

/* The job's entry once its mount request is done, waiting until
 * deadline_ms (lock held); NULL when none; still pending on timeout. An
 * entry of another user than peer_uid (0: root, who sees all) is NULL at
 * once: a user never waits on, nor learns of, another user's pending job. */
struct job_entry *holders_settled_job_locked(struct daemon_state *ds, uint32_t job_id, uid_t peer_uid,
					     long long deadline_ms);
struct job_entry *holders_settled_step_locked(struct daemon_state *ds, uint32_t job_id,
					      uint32_t step_id, uid_t peer_uid, long long deadline_ms);

#endif

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
 * deadline_ms (lock held); NULL when none; still pending on timeout. */
struct job_entry *holders_settled_job_locked(struct daemon_state *ds, uint32_t job_id,
					     long long deadline_ms);
struct job_entry *holders_settled_step_locked(struct daemon_state *ds, uint32_t job_id,
					      uint32_t step_id, long long deadline_ms);

#endif

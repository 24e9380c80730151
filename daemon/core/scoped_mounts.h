/* Images that belong to less than a whole job: a job step's own images
 * (srun --squash-image inside an allocation) and a squash-shell session's.
 * They live in registry.scoped, share node-level mounts with jobs under the
 * same policy (opened as the user, kernel or FUSE as for jobs), and go
 * when their holder ends:
 *   - a step: its slurmstepd's release (spank_exit), the job's release
 *     (epilog) or gc (reconcile.c asks Slurm whether the step still runs);
 *   - a session: the squash-shell process exits (its pidfd, watched by
 *     process_watch.c), however it ends.
 * A step sees the job's images and its own; a step image whose target
 * equals, contains or lies inside a job image's target is refused, except
 * the very same image at the same target, which the job's mount serves. */
#ifndef SQUASHD_SCOPED_MOUNTS_H
#define SQUASHD_SCOPED_MOUNTS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/job_mounts.h"

/* MountJobRequest with step_id (root: slurmstepd, the peer, whose exit
 * releases the step if its own release never comes; fd: the connection). */
void scoped_mount_step(struct daemon_state *ds, const struct peer *peer, int fd,
		       const Squash__MountJobRequest *req, struct reply *out,
		       struct teardown *td, long long deadline_ms);
/* ReleaseJobRequest with step_id (root). OK also when unknown. */
void scoped_release_step(struct daemon_state *ds, uint32_t job_id, uint32_t step_id,
			 struct reply *out, struct teardown *td);
/* Drops every step entry of job_id (the job's release or gc). Returns how
 * many. */
unsigned scoped_release_job_steps(struct daemon_state *ds, uint32_t job_id, struct teardown *td);
/* Releases one step that gc found gone. Returns true when it was there. */
bool scoped_release_step_gone(struct daemon_state *ds, uint32_t job_id, uint32_t step_id,
			      struct teardown *td);
/* StepInfoRequest with step_id: the job's mounts (if any) and the step's. */
void scoped_step_info(struct daemon_state *ds, const struct peer *peer,
		      const Squash__StepInfoRequest *req, struct reply *out, long long deadline_ms);
/* SessionMountRequest (any user): mounts for the peer process, as its user,
 * until it exits. fd is the connection (for SO_PEERPIDFD). */
void scoped_mount_session(struct daemon_state *ds, const struct peer *peer, int fd,
			  const Squash__SessionMountRequest *req, struct reply *out,
			  struct teardown *td, long long deadline_ms);
/* After a restart (lock not held): watch the sessions and steps whose
 * process still runs, release the others. */
void scoped_adopt(struct daemon_state *ds);
/* list: the steps and sessions holding m, as peer may see them (lock
 * held); and freeing what it added. */
void scoped_describe(const struct daemon_state *ds, const struct peer *peer,
		     const struct mount_entry *m, Squash__MountInfo *mi);
void scoped_free_mount_info(Squash__MountInfo *mi);
/* Whether peer (non-root) holds m through a step or session (lock held). */
bool scoped_peer_uses(const struct daemon_state *ds, const struct peer *peer,
		      const struct mount_entry *m);

#endif

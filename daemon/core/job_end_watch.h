/* The end of a job whose images its own first step mounted
 * (MountJobRequest.from_step: the prolog did not). No epilog may follow:
 * under PrologFlags=RunInJob Slurm runs no SPANK job prolog or epilog at
 * all. The job's extern step (PrologFlags=Contain) lives exactly as long
 * as the job on this node, so squashd watches that slurmstepd through a
 * pidfd; once it and every other slurmstepd of the job here are gone, the
 * job is released, instead of at gc's next pass. A job without an extern
 * step here (no Contain) is left to gc: between its steps no slurmstepd of
 * it need run on a node, so their absence proves nothing. The registry
 * keeps the mark (job_entry.ends_with_extern), so a restarted squashd
 * watches again, or releases a job that ended while it was away. */
#ifndef SQUASHD_JOB_END_WATCH_H
#define SQUASHD_JOB_END_WATCH_H

#include <stdint.h>
#include <sys/types.h>

#include "core/daemon.h"

/* Starts watching job_id (uid's job; called unlocked after its mount
 * request). Returns 0 when watched, -1 when the job is left to gc (no
 * extern step of it on this node, or it could not be watched; logged). */
int job_end_watch(struct daemon_state *ds, uint32_t job_id, uid_t uid);

/* After a restart (unlocked): watches again every job marked in the
 * registry, releasing those with no slurmstepd left on this node. */
void job_end_watch_adopt(struct daemon_state *ds);

#endif

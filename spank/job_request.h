/* The job's prolog and epilog (root, in slurmd, on every node of the job):
 * ask squashd to mount the job's images, and to release them. Both always
 * succeed as far as Slurm is concerned: a failing prolog or epilog drains
 * the node, which a user's mistake must never do. Failures are logged and
 * the job's steps report them (step_failure.h). */
#ifndef SPANK_SQUASH_JOB_REQUEST_H
#define SPANK_SQUASH_JOB_REQUEST_H

#include <stdint.h>

#include <slurm/spank.h>

#include "plugin_settings.h"

int squash_job_prolog(spank_t sp, const struct squash_settings *s);

/* From a step that found no images of its job on this node: asks squashd
 * for them as the prolog would have. Slurm skips the job prolog in some
 * cases (a requeued job that starts again on the node before slurmd
 * forgets its id), the prolog may not have reached squashd, or squashd
 * may have lost its registry. squashd applies the same policy as for the
 * prolog. Returns squashd's status, or -1. */
int squash_job_mount_late(spank_t sp, const struct squash_settings *s,
			  uint32_t job_id, uint32_t uid);
int squash_job_epilog(spank_t sp, const struct squash_settings *s);

#endif

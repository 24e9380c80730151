/* Each job step (root, in slurmstepd, the batch step included): asks squashd
 * where the job's images are mounted on this node; then each task, as root
 * and after Slurm has put it in the job's namespace (if a job namespace
 * plugin is on), binds them, read-only, on their targets in a mount
 * namespace of its own. A failure is kept and reported by every node's
 * first task, which then fails: the job fails with the reason in its
 * output, the node stays up. */
#ifndef SPANK_SQUASH_STEP_BIND_H
#define SPANK_SQUASH_STEP_BIND_H

#include <slurm/spank.h>

#include "plugin_settings.h"
#include "squash.pb-c.h"

/* option: the job's --squash-image text, NULL when not given (then squashd
 * is not contacted). Always returns 0; see squash_step_task_init. */
int squash_step_setup(spank_t sp, const char *option,
		      const struct squash_settings *s);

/* In each task, as root, before exec (slurm_spank_task_init_privileged):
 * makes the task's mount namespace and binds the step's mounts in it.
 * Always returns 0; a failure is kept for squash_step_task_init. */
int squash_step_task_privileged(spank_t sp);

/* In each task, as the user, before exec: returns -1 after printing the
 * stored reason on the task's stderr when the step could not be set up. */
int squash_step_task_init(spank_t sp);

/* Attaches the mounts of an OK StepInfo response in the current mount
 * namespace (which the caller made private): trees[i] is a detached copy
 * (open_tree) of job_mounts[i]'s source. Returns 0, or -1 with a reason in
 * err. */
int squash_step_bind_mounts(const Squash__Response *resp, const int *trees, char *err,
			    size_t errlen);

/* Keeps why this step cannot use its images (the first reason wins) and
 * logs it; the tasks print it and fail (squash_step_task_init). */
void squash_step_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void squash_step_cleanup(void);

#endif

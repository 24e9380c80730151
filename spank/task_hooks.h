/* Each task of a step: as root, after Slurm has put it in the job's
 * namespace (if a job namespace plugin is on), it gets a mount namespace of
 * its own with the job's images bound on their targets; then, as the
 * user, it gets the images' environments (task_image_env.h), or fails with
 * the step's kept reason when something went wrong. */
#ifndef SPANK_SQUASH_TASK_HOOKS_H
#define SPANK_SQUASH_TASK_HOOKS_H

#include <slurm/spank.h>

/* slurm_spank_task_init_privileged: makes the task's mount namespace and
 * binds the step's mounts in it. Always returns 0; a failure is kept for
 * squash_step_task_init. */
int squash_step_task_privileged(spank_t sp);

/* slurm_spank_task_init, as the user, before exec: sets the images'
 * environments; returns -1 after printing the kept reason on the task's
 * stderr (once per node) when the step could not be set up or the
 * environments not applied. */
int squash_step_task_init(spank_t sp);

#endif

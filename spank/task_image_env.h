/* Each task, as the user, after its images are bound: sets the
 * environments the images define (their /.squash/meta, image_meta.h) in
 * the task's environment.
 *
 * Which ones, in which order, and what is refused: images_env.h, the
 * names being those of --squash-env (env_option.h); a refusal fails the
 * task. */
#ifndef SPANK_SQUASH_TASK_IMAGE_ENV_H
#define SPANK_SQUASH_TASK_IMAGE_ENV_H

#include <stddef.h>

#include <slurm/spank.h>

#include "squash.pb-c.h"

/* resp: the step's mounts (squashd's step_info answer). option: the
 * --squash-env text, NULL when absent. Returns 0, or -1 with err. */
int squash_task_image_env_apply(spank_t sp, const Squash__Response *resp, const char *option,
				char *err, size_t errlen);

#endif

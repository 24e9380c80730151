/* Each task, as the user, after its images are bound: sets the
 * environments the images define (their /.squash/meta, image_meta.h) in
 * the task's environment.
 *
 * Which ones: the names of --squash-env (env_option.h) in every image that
 * defines them, or, without the option, each image's default-env;
 * --squash-env=none sets none. The metadata is read once per target: a
 * merged target (several images at one TARGET) is one tree, and its
 * /.squash/meta is the one the merge shows (the last image holding one),
 * so that image's environments are the target's. Images apply in
 * --squash-image order (the job's, then the step's own), so a later
 * image's prepend-path comes first, as a later image wins in a merge.
 * Refused, failing the task: metadata that does not parse, a named
 * environment no image of the step defines, and variables an image may not
 * set (squash_env_var_refusal: LD_* only from environments named with
 * --squash-env). */
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

/* --squash-env=NAME[,NAME...]: which environments of the images (their
 * /.squash/meta, image_meta.h) the tasks get. Like --squash-image, Slurm
 * hands the option to every context: sbatch, salloc and srun check its
 * syntax, each step's slurmstepd keeps it for its tasks
 * (task_image_env.h), and the job's steps inherit it from the job's
 * environment (SLURM_SPANK__SLURM_SPANK_OPTION_squash_squash_env), an
 * srun's own --squash-env replacing it for that step. Absent: each image's
 * default-env; "none": no environment. */
#ifndef SPANK_SQUASH_ENV_OPTION_H
#define SPANK_SQUASH_ENV_OPTION_H

#include <stdbool.h>
#include <stddef.h>

#include <slurm/spank.h>

#include "images_env.h"

/* The option for spank_option_register. */
struct spank_option *squash_env_option(void);

/* The option's text, or NULL when it was not given. */
const char *squash_env_option_value(void);

/* sbatch, salloc, srun: with images (have_images) the names must be valid;
 * without, the option is refused. source: the variable the text came from
 * (env_default.h), named in the message, or NULL. Returns 0, or -1 after
 * telling the user. */
int squash_env_option_check(bool have_images, const char *source);

void squash_env_option_clear(void);

#endif

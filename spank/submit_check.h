/* Submit-time check of --squash-image in sbatch, salloc and srun (as the
 * user): every image must exist, be readable and look like a squashfs image,
 * and every target must be allowed, so a mistake is refused before the job
 * is queued. Hands the canonical list to the prolog. */
#ifndef SPANK_SQUASH_SUBMIT_CHECK_H
#define SPANK_SQUASH_SUBMIT_CHECK_H

#include <slurm/spank.h>

#include "plugin_settings.h"

/* option: the --squash-image text, NULL when not given. Returns 0, or -1
 * after telling the user why (the command then refuses to submit). */
int squash_submit_check(spank_t sp, const char *option,
			const struct squash_settings *s);

/* The single checks, also used for srun's step images (step_images.c).
 * Each returns 0, or -1 after telling the user why. */
struct squash_image_spec;
struct squash_image_list;
int resolve_image(struct squash_image_spec *item); /* realpath, in place */
int check_image(const char *image);               /* readable squashfs file */
int check_target(struct squash_image_spec *item, const struct squash_settings *s);
int check_duplicates(const struct squash_image_list *list);

#endif

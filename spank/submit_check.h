/* Submit-time check of --squash-image in sbatch, salloc and srun (as the
 * user): every image must exist, be readable and look like a squashfs image,
 * and every target must be allowed, so a mistake is refused before the job
 * is queued. Hands the canonical list to the prolog. */
#ifndef SPANK_SQUASH_SUBMIT_CHECK_H
#define SPANK_SQUASH_SUBMIT_CHECK_H

#include <stdbool.h>

#include <slurm/spank.h>

#include "plugin_settings.h"

/* sbatch, salloc, or srun creating its own allocation (not srun inside
 * one: step_images.h). option: the --squash-image text, NULL when not
 * given. srun: the command is srun (local context), whose own step also
 * gets the list. Returns 0, or -1 after telling the user why (the command
 * then refuses to submit). */
int squash_submit_check(spank_t sp, const char *option,
			const struct squash_settings *s, bool srun);

/* The same checks without the hand-off to the prolog (srun's step images,
 * step_images.c): on 0, list holds the resolved images and their targets
 * (free with squash_imagespec_free); on -1 the user has been told why. */
struct squash_image_list;
int squash_submit_check_list(const char *option, const struct squash_settings *s,
			     struct squash_image_list *list);

#endif

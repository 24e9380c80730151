/* A step's own images: `srun --squash-image=B` inside an allocation.
 *
 * srun (local context, as the user) tells them apart from the option it
 * inherits from the allocation (SLURM_SPANK__SLURM_SPANK_OPTION_squash_
 * squash_image), checks them as sbatch would (the user sees mistakes at
 * once) and hands the canonical list to the step in SQUASH_STEP_IMAGES.
 * Each node's slurmstepd (remote context, root) asks its squashd to mount
 * them for (job, step) as the job's user, binds them with the job's images
 * and releases them at the end of the step (slurm_spank_exit, which runs
 * however the tasks ended). squashd's gc releases the step's images when
 * Slurm no longer knows the step (slurmstepd killed), and the job's
 * release drops them all. See docs/architecture.md. */
#ifndef SPANK_SQUASH_STEP_IMAGES_H
#define SPANK_SQUASH_STEP_IMAGES_H

#include <stdbool.h>
#include <stdint.h>

#include <slurm/spank.h>

#include "plugin_settings.h"
#include "squash.pb-c.h"

/* srun inside an allocation. option: --squash-image as srun got it (from
 * its command line, or inherited). Returns 0, or -1 after telling the user
 * why (srun then stops). */
int squash_step_images_check(spank_t sp, const char *option, const struct squash_settings *s);

/* slurmstepd: when this step has images of its own, asks squashd to mount
 * them and fills info so that step_info answers them too. Returns 0 (also
 * when there are none), or -1 with the reason in err. */
int squash_step_images_mount(spank_t sp, const struct squash_settings *s, uint32_t job_id,
			     uid_t uid, Squash__StepInfoRequest *info, char *err, size_t errlen);

/* slurmstepd at the end of the step: releases what squash_step_images_mount
 * mounted (nothing when it mounted nothing). */
void squash_step_images_release(const struct squash_settings *s);

#endif

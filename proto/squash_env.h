/* The environment variables the plugin, squashd's clients and jobs share:
 * one name each, defined here, and the tasks' environment built once for
 * steps (spank/step_bind.c) and squash-shell (daemon/cli/squash_shell.c). */
#ifndef SQUASH_ENV_H
#define SQUASH_ENV_H

#include "squash.pb-c.h"

/* The job's checked image list (IMAGE:TARGET,..., escaped as in the option,
 * '%' doubled). The submit check hands it to Slurm's job control
 * environment under SQUASH_ENV_JOB_IMAGES; Slurm shows it to the prolog
 * and epilog with "SPANK_" in front and to the job's steps with
 * "SLURM_SPANK_" in front. (The bare name is never in any environment;
 * tasks' SQUASH_IMAGES below is another list. Renaming it would rename
 * the documented SPANK_ and SLURM_SPANK_ variables of running jobs.) */
#define SQUASH_ENV_JOB_IMAGES "SQUASH_IMAGES"
#define SQUASH_ENV_JOB_IMAGES_PROLOG "SPANK_" SQUASH_ENV_JOB_IMAGES
#define SQUASH_ENV_JOB_IMAGES_STEP "SLURM_SPANK_" SQUASH_ENV_JOB_IMAGES

/* Slurm's own variable for the --squash-image option (sbatch, salloc and
 * srun read it; steps inherit it). */
#define SQUASH_ENV_OPTION "SLURM_SPANK__SLURM_SPANK_OPTION_squash_squash_image"

/* srun's canonical list of a step's own images, carried to the step's
 * slurmstepd; removed from the tasks' environment. */
#define SQUASH_ENV_STEP_IMAGES "SQUASH_STEP_IMAGES"

/* What tasks (and squash-shell's command) get: the targets in option
 * order separated by ':', the first target, the images separated by ','. */
#define SQUASH_ENV_TASK_MOUNTS "SQUASH_MOUNTS"
#define SQUASH_ENV_TASK_MOUNT "SQUASH_MOUNT"
#define SQUASH_ENV_TASK_IMAGES "SQUASH_IMAGES"

#define SQUASH_TASK_ENV_VARS 3
struct squash_task_env {
	const char *name[SQUASH_TASK_ENV_VARS];
	char *value[SQUASH_TASK_ENV_VARS];
};

/* The tasks' environment for the mounts of a step_info or session_mount
 * answer (at least one). Returns 0, or -1 when out of memory. */
int squash_task_env_build(const Squash__Response *resp, struct squash_task_env *env);
void squash_task_env_free(struct squash_task_env *env);

#endif

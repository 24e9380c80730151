/* The environment variables the plugin, squashd's clients and jobs share:
 * one name each, defined here, and the tasks' environment built once for
 * steps (spank/task_env_export.c) and squash-shell (daemon/cli/squash_shell.c). */
#ifndef SQUASH_ENV_H
#define SQUASH_ENV_H

#include <stdbool.h>

#include "squash.pb-c.h"

/* The job's checked image list (IMAGE:TARGET,..., escaped as in the option,
 * '%' doubled). The submit check hands it to Slurm's job control
 * environment under SQUASH_ENV_JOB_IMAGES; Slurm shows it to the prolog
 * and epilog with "SPANK_" in front and to the job's steps with
 * "SLURM_SPANK_" in front. (The bare name is never in any environment.
 * It is not the tasks' SQUASH_IMAGES below, another list.) */
#define SQUASH_ENV_JOB_IMAGES "SQUASH_JOB_IMAGES"
#define SQUASH_ENV_JOB_IMAGES_PROLOG "SPANK_" SQUASH_ENV_JOB_IMAGES
#define SQUASH_ENV_JOB_IMAGES_STEP "SLURM_SPANK_" SQUASH_ENV_JOB_IMAGES
/* The same list as the plugin of 0.1.0 named it (job control name
 * SQUASH_IMAGES, like the tasks' list): a job submitted before an upgrade
 * carries only these, so they are read when the names above are absent;
 * never written. */
#define SQUASH_ENV_JOB_IMAGES_PROLOG_0_1 "SPANK_SQUASH_IMAGES"
#define SQUASH_ENV_JOB_IMAGES_STEP_0_1 "SLURM_SPANK_SQUASH_IMAGES"

/* The job's list in this process's environment: the prolog's or epilog's
 * (prolog true), or a step's (as srun sees it), under either name above;
 * NULL when the job has none. */
const char *squash_env_job_images(bool prolog);

/* Slurm's own variable for the --squash-image option (sbatch, salloc and
 * srun read it; steps inherit it). */
#define SQUASH_ENV_OPTION "SLURM_SPANK__SLURM_SPANK_OPTION_squash_squash_image"
/* The same for --squash-env. */
#define SQUASH_ENV_ENV_OPTION "SLURM_SPANK__SLURM_SPANK_OPTION_squash_squash_env"

/* srun's canonical list of a step's own images, carried to the step's
 * slurmstepd; removed from the tasks' environment. */
#define SQUASH_ENV_STEP_IMAGES "SQUASH_STEP_IMAGES"

/* What tasks (and squash-shell's command) get: the targets in option
 * order separated by ':', the first target, the images separated by ','. */
#define SQUASH_ENV_TASK_MOUNTS "SQUASH_MOUNTS"
#define SQUASH_ENV_TASK_MOUNT "SQUASH_MOUNT"
#define SQUASH_ENV_TASK_IMAGES "SQUASH_IMAGES"
/* The images' environments applied (images_env.h): TARGET:ENV, separated
 * by ','; empty when the images define none; not set by "none". */
#define SQUASH_ENV_TASK_ENVS "SQUASH_ENVS"

#define SQUASH_TASK_ENV_VARS 3
struct squash_task_env {
	const char *name[SQUASH_TASK_ENV_VARS];
	char *value[SQUASH_TASK_ENV_VARS];
};

/* Whether mount i of resp has the target of an earlier one: images merged
 * at one target (the same source), bound and listed once, at the first. */
bool squash_mount_repeats_target(const Squash__Response *resp, size_t i);

/* The tasks' environment for the mounts of a step_info or session_mount
 * answer (at least one). Returns 0, or -1 when out of memory. */
int squash_task_env_build(const Squash__Response *resp, struct squash_task_env *env);
void squash_task_env_free(struct squash_task_env *env);

#endif

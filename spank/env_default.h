/* Default images and environments from the environment, following Slurm's
 * input variables: sbatch reads SBATCH_SQUASH_IMAGE and SBATCH_SQUASH_ENV,
 * salloc SALLOC_SQUASH_IMAGE and SALLOC_SQUASH_ENV, and srun
 * SLURM_SQUASH_IMAGE and SLURM_SQUASH_ENV when it creates its own
 * allocation. The value is
 * handed to Slurm as its own SPANK option variable, so Slurm applies it
 * like any option from the environment: --squash-image in a #SBATCH line
 * loses to it and --squash-image on the command line wins over it, and
 * the steps get it as if it had been given as an option. */
#ifndef SPANK_SQUASH_ENV_DEFAULT_H
#define SPANK_SQUASH_ENV_DEFAULT_H

/* The command that makes the allocation, as the dispatch tells it. */
enum squash_env_default_command {
	SQUASH_DEFAULT_ALLOCATOR, /* allocator context: sbatch or salloc (by program name) */
	SQUASH_DEFAULT_SRUN,      /* local context: srun creating its own allocation */
};

/* The options that take a default. */
enum squash_default_kind {
	SQUASH_DEFAULT_IMAGES, /* --squash-image */
	SQUASH_DEFAULT_ENVS,   /* --squash-env */
};

/* In slurm_spank_init (before Slurm reads options): copies the command's
 * variables, when set and not empty, into Slurm's variables for the
 * options (SQUASH_ENV_OPTION, SQUASH_ENV_ENV_OPTION: squash_env.h). Not for
 * srun inside an allocation: a default must not turn into a request for
 * step images or change the job's environments. */
void squash_env_default_apply(enum squash_env_default_command command);

/* The name of the variable kind's option text came from, or NULL when it
 * did not come from one (given on the command line or in the script). */
const char *squash_env_default_source(enum squash_default_kind kind, const char *option);

/* Takes kind's option out of the environment the job gets (a default
 * environment for a job without images: nothing to apply it to). */
void squash_env_default_drop(enum squash_default_kind kind);

#endif

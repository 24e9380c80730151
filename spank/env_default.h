/* Default images from the environment, following Slurm's input variables:
 * sbatch reads SBATCH_SQUASH_IMAGE, salloc SALLOC_SQUASH_IMAGE, and srun
 * SLURM_SQUASH_IMAGE when it creates its own allocation. The value is
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

/* In slurm_spank_init (before Slurm reads options): copies the command's
 * variable, when set and not empty, into SQUASH_ENV_OPTION (squash_env.h).
 * Not for srun inside an allocation: a default must not turn into a
 * request for step images. */
void squash_env_default_apply(enum squash_env_default_command command);

/* The name of the variable the option text came from, or NULL when it did
 * not come from one (given on the command line or in the script). */
const char *squash_env_default_source(const char *option);

#endif

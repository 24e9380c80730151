/* Default images from the environment, following Slurm's input variables:
 * sbatch reads SBATCH_SQUASH_IMAGE, salloc SALLOC_SQUASH_IMAGE, and srun
 * SLURM_SQUASH_IMAGE when it creates its own allocation. The value is
 * handed to Slurm as its own SPANK option variable, so Slurm applies it
 * like any option from the environment: --squash-image in a #SBATCH line
 * loses to it and --squash-image on the command line wins over it, and
 * the steps get it as if it had been given as an option. */
#ifndef SPANK_SQUASH_ENV_DEFAULT_H
#define SPANK_SQUASH_ENV_DEFAULT_H

/* The variable Slurm itself reads for --squash-image of plugin "squash" in
 * sbatch, salloc and srun, and exports into the job (so srun inside a job
 * inherits the job's option through it). */
#define SQUASH_SLURM_OPTION_ENV "SLURM_SPANK__SLURM_SPANK_OPTION_squash_squash_image"

/* In slurm_spank_init (allocator and local context, before Slurm reads
 * options): copies this command's variable, when set and not empty, into
 * SQUASH_SLURM_OPTION_ENV. srun inside an allocation ignores its
 * variable: a default must not turn into a request for step images. */
void squash_env_default_apply(void);

/* The name of the variable the option text came from, or NULL when it did
 * not come from one (given on the command line or in the script). */
const char *squash_env_default_source(const char *option);

#endif

/* Default images from the environment (see env_default.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "env_default.h"
#include "squash_env.h"

static const char *used_name;
static char *used_value;

/* This command's variable: by program in allocator context (sbatch and
 * salloc share it), srun in local context. */
static const char *variable_name(void)
{
	switch (spank_context()) {
	case S_CTX_ALLOCATOR:
		if (!strcmp(program_invocation_short_name, "sbatch"))
			return "SBATCH_SQUASH_IMAGE";
		if (!strcmp(program_invocation_short_name, "salloc"))
			return "SALLOC_SQUASH_IMAGE";
		return NULL;
	case S_CTX_LOCAL:
		/* Inside an allocation srun runs steps; the job's images were
		 * fixed at allocation and a default must not re-request them. */
		if (getenv("SLURM_JOB_ID"))
			return NULL;
		return "SLURM_SQUASH_IMAGE";
	default:
		return NULL;
	}
}

void squash_env_default_apply(void)
{
	const char *name = variable_name();
	const char *value = name ? getenv(name) : NULL;

	if (!value || !*value)
		return;
	free(used_value);
	used_value = strdup(value);
	if (!used_value)
		return;
	if (setenv(SQUASH_ENV_OPTION, value, 1) != 0) {
		slurm_error("squash: cannot apply %s: %s", name, strerror(errno));
		free(used_value);
		used_value = NULL;
		return;
	}
	used_name = name;
	slurm_verbose("squash: default images from %s", name);
}

const char *squash_env_default_source(const char *option)
{
	if (!option || !used_value || strcmp(option, used_value))
		return NULL;
	return used_name;
}

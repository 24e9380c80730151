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

/* The command's variable: sbatch and salloc share the allocator context
 * and are told apart by program name. */
static const char *variable_name(enum squash_env_default_command command)
{
	if (command == SQUASH_DEFAULT_SRUN)
		return "SLURM_SQUASH_IMAGE";
	if (!strcmp(program_invocation_short_name, "sbatch"))
		return "SBATCH_SQUASH_IMAGE";
	if (!strcmp(program_invocation_short_name, "salloc"))
		return "SALLOC_SQUASH_IMAGE";
	return NULL;
}

void squash_env_default_apply(enum squash_env_default_command command)
{
	const char *name = variable_name(command);
	const char *value = name ? getenv(name) : NULL;

	if (!value || !*value)
		return;
	free(used_value);
	used_value = strdup(value);
	if (!used_value) {
		slurm_error("squash: cannot apply %s: out of memory", name);
		return;
	}
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

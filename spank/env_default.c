/* Default images and environments from the environment (see
 * env_default.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "env_default.h"
#include "squash_env.h"

/* Per option: Slurm's variable for it, the suffix of the users' variables
 * (SBATCH_, SALLOC_, SLURM_ before it), and what was applied. */
static struct default_var {
	const char *option_var;
	const char *suffix;
	char name[64];
	char *value;
} defaults[] = {
	[SQUASH_DEFAULT_IMAGES] = { SQUASH_ENV_OPTION, "SQUASH_IMAGE", "", NULL },
	[SQUASH_DEFAULT_ENVS] = { SQUASH_ENV_ENV_OPTION, "SQUASH_ENV", "", NULL },
};

/* The command's prefix: sbatch and salloc share the allocator context and
 * are told apart by program name. */
static const char *prefix_of(enum squash_env_default_command command)
{
	if (command == SQUASH_DEFAULT_SRUN)
		return "SLURM_";
	if (!strcmp(program_invocation_short_name, "sbatch"))
		return "SBATCH_";
	if (!strcmp(program_invocation_short_name, "salloc"))
		return "SALLOC_";
	return NULL;
}

static void apply_one(struct default_var *d, const char *prefix)
{
	const char *value;

	snprintf(d->name, sizeof(d->name), "%s%s", prefix, d->suffix);
	value = getenv(d->name);
	if (!value || !*value)
		return;
	free(d->value);
	d->value = strdup(value);
	if (!d->value) {
		slurm_error("squash: cannot apply %s: out of memory", d->name);
		return;
	}
	if (setenv(d->option_var, value, 1) != 0) {
		slurm_error("squash: cannot apply %s: %s", d->name, strerror(errno));
		free(d->value);
		d->value = NULL;
		return;
	}
	slurm_verbose("squash: default %s from %s", d->suffix, d->name);
}

void squash_env_default_apply(enum squash_env_default_command command)
{
	const char *prefix = prefix_of(command);

	if (!prefix)
		return;
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		apply_one(&defaults[i], prefix);
}

const char *squash_env_default_source(enum squash_default_kind kind, const char *option)
{
	const struct default_var *d = &defaults[kind];

	if (!option || !d->value || strcmp(option, d->value))
		return NULL;
	return d->name;
}

void squash_env_default_drop(enum squash_default_kind kind)
{
	unsetenv(defaults[kind].option_var);
}

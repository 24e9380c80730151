/* The --squash-env option (see env_option.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env_option.h"

static char *env_option; /* as given; NULL when absent */

/* Only stores the text, as the --squash-image callback does: Slurm may
 * call it more than once. */
static int env_option_cb(int val, const char *optarg, int remote)
{
	char *copy;

	(void)val;
	(void)remote;
	if (!optarg)
		return -1;
	copy = strdup(optarg);
	if (!copy) {
		slurm_error("squash: out of memory");
		return -1;
	}
	free(env_option);
	env_option = copy;
	return 0;
}

static struct spank_option env_opt = {
	.name = "squash-env",
	.arginfo = "[IMAGE:]NAME[,...]",
	.usage = "Set the environments NAME that the images define (their /.squash/meta, or a uenv "
		 "image's views in /meta/env.json; with "
		 "IMAGE: only in the image whose target ends in IMAGE) in every task; default: each "
		 "image's default-env; none: no environment",
	.has_arg = 1,
	.val = 0,
	.cb = env_option_cb,
};

struct spank_option *squash_env_option(void)
{
	return &env_opt;
}

const char *squash_env_option_value(void)
{
	return env_option;
}

int squash_env_option_check(bool have_images, const char *source)
{
	struct squash_env_names *names;
	char why[256];
	int rc;

	if (!env_option)
		return 0;
	if (!have_images) {
		slurm_error("squash: --squash-env=%s: the job or step has no images (--squash-image) "
			    "whose environments it could apply", env_option);
		return -1;
	}
	if (!strcmp(env_option, SQUASH_ENV_NAMES_NONE))
		return 0;
	names = malloc(sizeof(*names));
	if (!names) {
		slurm_error("squash: out of memory");
		return -1;
	}
	rc = squash_env_names_split(env_option, "--squash-env", names, why, sizeof why);
	if (rc && source)
		slurm_error("squash: %s (from %s in the environment; correct or unset it, or give "
			    "--squash-env on the command line)", why, source);
	else if (rc)
		slurm_error("squash: %s", why);
	free(names);
	return rc;
}

void squash_env_option_clear(void)
{
	free(env_option);
	env_option = NULL;
}

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "squash_env.h"

bool squash_mount_repeats_target(const Squash__Response *resp, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (!strcmp(resp->job_mounts[j]->target, resp->job_mounts[i]->target))
			return true;
	return false;
}

/* The targets (each once: a merge group has one) or the images of resp's
 * mounts, joined by sep. */
static char *join(const Squash__Response *resp, int targets, char sep)
{
	size_t len = 1;
	char *out, *p;

	for (size_t i = 0; i < resp->n_job_mounts; i++)
		len += strlen(targets ? resp->job_mounts[i]->target : resp->job_mounts[i]->image) + 1;
	out = p = malloc(len);
	if (!out)
		return NULL;
	*p = '\0';
	for (size_t i = 0; i < resp->n_job_mounts; i++) {
		const char *field = targets ? resp->job_mounts[i]->target : resp->job_mounts[i]->image;
		size_t n = strlen(field);

		if (targets && squash_mount_repeats_target(resp, i))
			continue;
		if (p != out)
			*p++ = sep;
		memcpy(p, field, n + 1);
		p += n;
	}
	return out;
}

int squash_task_env_build(const Squash__Response *resp, struct squash_task_env *env)
{
	env->name[0] = SQUASH_ENV_TASK_MOUNTS;
	env->value[0] = join(resp, 1, ':');
	env->name[1] = SQUASH_ENV_TASK_MOUNT;
	env->value[1] = strdup(resp->n_job_mounts ? resp->job_mounts[0]->target : "");
	env->name[2] = SQUASH_ENV_TASK_IMAGES;
	env->value[2] = join(resp, 0, ',');
	for (size_t i = 0; i < SQUASH_TASK_ENV_VARS; i++) {
		if (!env->value[i]) {
			squash_task_env_free(env);
			return -1;
		}
	}
	return 0;
}

void squash_task_env_free(struct squash_task_env *env)
{
	for (size_t i = 0; i < SQUASH_TASK_ENV_VARS; i++) {
		free(env->value[i]);
		env->value[i] = NULL;
	}
}

const char *squash_env_job_images(bool prolog)
{
	const char *text = getenv(prolog ? SQUASH_ENV_JOB_IMAGES_PROLOG : SQUASH_ENV_JOB_IMAGES_STEP);

	return text ? text : getenv(prolog ? SQUASH_ENV_JOB_IMAGES_PROLOG_0_1
					   : SQUASH_ENV_JOB_IMAGES_STEP_0_1);
}

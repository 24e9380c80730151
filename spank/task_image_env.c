/* Images' environments in a task (see task_image_env.h). */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "images_env.h"
#include "task_image_env.h"

/* Environment values larger than this are not grown into (PATH and the
 * like are far smaller). */
#define TASK_ENV_VALUE_MAX (1024 * 1024)

/* The task's value of var, malloc'd; *value NULL when unset. */
static int task_getenv(void *ctx, const char *var, char **value, char *why, size_t whylen)
{
	spank_t sp = ctx;
	size_t size = 4096;

	*value = NULL;
	while (size <= TASK_ENV_VALUE_MAX) {
		char *buf = malloc(size);
		spank_err_t rc;

		if (!buf)
			break;
		rc = spank_getenv(sp, var, buf, (int)size);
		if (rc == ESPANK_SUCCESS) {
			*value = buf;
			return 0;
		}
		free(buf);
		if (rc == ESPANK_ENV_NOEXIST)
			return 0;
		if (rc != ESPANK_NOSPACE)
			break;
		size *= 4;
	}
	snprintf(why, whylen, "cannot read the task's %s", var);
	return -1;
}

/* Sets var in the task's environment. */
static int task_setenv(void *ctx, const char *var, const char *value, char *why, size_t whylen)
{
	spank_err_t rc = value ? spank_setenv(ctx, var, value, 1) : spank_unsetenv(ctx, var);

	if (rc == ESPANK_SUCCESS || (!value && rc == ESPANK_ENV_NOEXIST))
		return 0;
	snprintf(why, whylen, "cannot set the task's %s: %s", var, spank_strerror(rc));
	return -1;
}

int squash_task_image_env_apply(spank_t sp, const Squash__Response *resp, const char *option,
				char *err, size_t errlen)
{
	uint32_t global_id = 1;
	/* Notes once per step, on its first task's stderr (the job's output). */
	bool first_task = spank_get_item(sp, S_TASK_GLOBAL_ID, &global_id) == ESPANK_SUCCESS &&
			  global_id == 0;
	const struct squash_env_access env = {
		.option = "--squash-env",
		.images = "of this step",
		.get = task_getenv,
		.set = task_setenv,
		.ctx = sp,
		.notes = first_task ? stderr : NULL,
	};

	return squash_images_env_apply(resp, option, &env, err, errlen);
}

/* The tasks' environment (see task_env_export.h). */
#include "config.h"

#include <stdio.h>

#include "squash_env.h"
#include "task_env_export.h"

int squash_task_env_export(spank_t sp, const Squash__Response *resp, char *err,
			   size_t errlen)
{
	struct squash_task_env env;
	spank_err_t rc = ESPANK_SUCCESS;

	if (squash_task_env_build(resp, &env) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < SQUASH_TASK_ENV_VARS && rc == ESPANK_SUCCESS; i++)
		rc = spank_setenv(sp, env.name[i], env.value[i], 1);
	if (rc != ESPANK_SUCCESS)
		snprintf(err, errlen, "cannot set the tasks' environment: %s", spank_strerror(rc));
	squash_task_env_free(&env);
	return rc == ESPANK_SUCCESS ? 0 : -1;
}

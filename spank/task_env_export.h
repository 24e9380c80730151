/* The tasks' environment (SQUASH_MOUNTS, SQUASH_IMAGES...; names and values
 * in squash_env.h), set by slurmstepd before the tasks fork. */
#ifndef SPANK_SQUASH_TASK_ENV_EXPORT_H
#define SPANK_SQUASH_TASK_ENV_EXPORT_H

#include <stddef.h>

#include <slurm/spank.h>

#include "squash.pb-c.h"

/* From an OK StepInfo response. Returns 0, or -1 with err. */
int squash_task_env_export(spank_t sp, const Squash__Response *resp, char *err,
			   size_t errlen);

#endif

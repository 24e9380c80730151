/* Why a step cannot use its images (see step_failure.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <slurm/spank.h>

#include "step_failure.h"

static char *step_error;
static char step_error_oom[] = "squash: cannot set up the job's images (out of memory)";

void squash_step_fail(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (step_error)
		return; /* the first reason is the one that matters */
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = step_error_oom;
	va_end(ap);
	slurm_error("%s", msg);
	step_error = msg;
}

const char *squash_step_failure(void)
{
	return step_error;
}

void squash_step_failure_clear(void)
{
	if (step_error != step_error_oom)
		free(step_error);
	step_error = NULL;
}

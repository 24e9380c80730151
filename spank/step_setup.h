/* Each job step (root, in slurmstepd, the batch step included), before its
 * tasks fork: asks squashd where the job's images (and the step's own) are
 * mounted on this node, exports them to the tasks' environment and keeps
 * what the tasks need to bind them (task_hooks.h). A failure is kept
 * (step_failure.h) for the tasks to report. */
#ifndef SPANK_SQUASH_STEP_SETUP_H
#define SPANK_SQUASH_STEP_SETUP_H

#include <stdint.h>

#include <slurm/spank.h>

#include "plugin_settings.h"
#include "squash.pb-c.h"

/* What slurmstepd keeps for its tasks once squashd's answer is usable. */
struct step_kept_mounts {
	Squash__Response *resp; /* squashd's OK StepInfo answer */
	uint32_t job_id;
	int source_ns; /* the mount namespace that holds the node's mounts, or -1 */
};

/* option: the job's --squash-image text, NULL when not given (then squashd
 * is not contacted). Always returns 0; the tasks report failures. */
int squash_step_setup(spank_t sp, const char *option,
		      const struct squash_settings *s);

/* What squash_step_setup kept for the tasks, or NULL. */
const struct step_kept_mounts *squash_step_kept_mounts(void);

/* Closes the kept namespace: a task keeps no handle on the node's. */
void squash_step_forget_source_ns(void);

void squash_step_setup_cleanup(void);

#endif

/* The hooks each task of a step runs (see task_hooks.h). */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "env_option.h"
#include "mount_attach.h"
#include "node_mounts.h"
#include "step_failure.h"
#include "step_setup.h"
#include "task_hooks.h"
#include "task_image_env.h"

/* After Slurm has put the task in the job's namespace (job_container/tmpfs,
 * namespace/tmpfs, namespace/linux do so here, and would replace any
 * namespace slurmstepd made earlier): makes the task's own mount namespace
 * and attaches the job's mounts in it. */
static int attach(const struct step_kept_mounts *kept, char *err, size_t errlen)
{
	const Squash__Response *resp = kept->resp;
	int *trees = calloc(resp->n_job_mounts ? resp->n_job_mounts : 1, sizeof(*trees));
	int rc = -1;

	if (!trees) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < resp->n_job_mounts; i++)
		trees[i] = -1;
	if (unshare(CLONE_NEWNS) != 0) {
		snprintf(err, errlen, "cannot make a private mount namespace: %s", strerror(errno));
	} else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		/* Nothing the task mounts may propagate back to the host. */
		snprintf(err, errlen, "cannot make the task's mounts private: %s", strerror(errno));
	} else if (squash_node_mounts_copy(kept->source_ns, resp, trees, err, errlen) == 0 &&
		   squash_attach_job_mounts(resp, trees, err, errlen) == 0) {
		const char *mounts = resp->mount_dir && resp->mount_dir[0] == '/' ? resp->mount_dir : NULL;
		const char *sessions = resp->sessions_dir && resp->sessions_dir[0] == '/' ?
					       resp->sessions_dir : NULL;

		/* Node-level mounts the namespace copied (other jobs' and squash-
		 * shell sessions'): not the task's to pin. */
		rc = (mounts || sessions) && squash_node_mounts_detach(mounts, sessions, err, errlen) ? -1 : 0;
	}
	for (size_t i = 0; i < resp->n_job_mounts; i++)
		if (trees[i] >= 0)
			close(trees[i]);
	free(trees);
	return rc;
}

int squash_step_task_privileged(spank_t sp)
{
	const struct step_kept_mounts *kept = squash_step_kept_mounts();
	char why[1024];

	if (kept && !squash_step_failure() && attach(kept, why, sizeof why) != 0)
		squash_step_fail("squash: job %u: %s", kept->job_id, why);
	squash_step_forget_source_ns(); /* the task keeps no handle on the node's namespace */
	return 0; /* squash_step_task_init reports it, as the user */
}

int squash_step_task_init(spank_t sp)
{
	const struct step_kept_mounts *kept = squash_step_kept_mounts();
	const char *reason = squash_step_failure();
	char why[1536], msg[1600];
	int local_id = 0;

	/* As the user: the metadata is in the user's images. Not kept with
	 * squash_step_fail, whose log line would reach the task's stderr. */
	if (!reason && kept &&
	    squash_task_image_env_apply(sp, kept->resp, squash_env_option_value(), why, sizeof why)) {
		snprintf(msg, sizeof msg, "squash: job %u: %s", kept->job_id, why);
		reason = msg;
	}
	if (!reason)
		return 0;
	/* One copy of the reason per node is enough; every task fails. */
	if (spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS || local_id == 0)
		fprintf(stderr, "%s\n", reason);
	return -1;
}

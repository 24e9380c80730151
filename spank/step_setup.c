/* Setting up a step's images in slurmstepd (see step_setup.h). */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "client.h"
#include "job_request.h"
#include "node_mounts.h"
#include "prolog_note.h"
#include "step_failure.h"
#include "step_images.h"
#include "step_setup.h"
#include "task_env_export.h"

/* From slurmstepd's set-up until it exits. */
static struct step_kept_mounts kept = { .source_ns = -1 };

const struct step_kept_mounts *squash_step_kept_mounts(void)
{
	return kept.resp ? &kept : NULL;
}

void squash_step_forget_source_ns(void)
{
	if (kept.source_ns >= 0)
		close(kept.source_ns);
	kept.source_ns = -1;
}

void squash_step_setup_cleanup(void)
{
	if (kept.resp)
		squash__response__free_unpacked(kept.resp, NULL);
	kept.resp = NULL;
	squash_step_forget_source_ns();
}

/* Before the tasks are forked: exports the mounts to the tasks'
 * environment and keeps what each task needs to bind them. */
static void prepare(spank_t sp, uint32_t job_id, Squash__Response *resp, pid_t squashd_pid)
{
	char why[1024];

	if (squash_task_env_export(sp, resp, why, sizeof why) != 0) {
		squash_step_fail("squash: job %u: %s", job_id, why);
		return;
	}
	kept.source_ns = squash_node_mounts_namespace(squashd_pid, why, sizeof why);
	if (kept.source_ns < 0) {
		squash_step_fail("squash: job %u: %s", job_id, why);
		return;
	}
	kept.resp = resp;
	kept.job_id = job_id;
}

/* Turns a non-OK answer into the reason the tasks print, naming the real
 * cause: the prolog could not reach squashd (its note says why), squashd
 * lost its registry (its answer says so), or the prolog never asked. */
static void explain(const struct squash_settings *s, uint32_t job_id, const char *host,
		    const Squash__Response *resp)
{
	const char *msg = resp->message && *resp->message ? resp->message
							  : "no reason given";
	char note[1024];

	switch (resp->status) {
	case SQUASH__STATUS__USER_ERROR:
		squash_step_fail("squash: job %u: %s", job_id, msg);
		break;
	case SQUASH__STATUS__NOT_FOUND:
		if (prolog_note_read(s, job_id, note, sizeof note) == 0)
			squash_step_fail("squash: job %u: node %s has no images for this job: %s",
				   job_id, host, note);
		else if (strstr(msg, "lost its registry"))
			squash_step_fail("squash: job %u: node %s: %s" SQUASH_ASK_ADMIN, job_id, host,
					 msg, host);
		else
			/* A cluster whose prolog does not run at allocation, or an
			 * srun --jobid joining the allocation from outside it (then
			 * srun cannot tell its own images from the job's). */
			squash_step_fail("squash: job %u: node %s has no images for this job (%s): "
				   "the job prolog did not ask for them. The job's images are "
				   "mounted when the job is allocated, which needs "
				   "PrologFlags=Alloc in slurm.conf; an srun adds images of its "
				   "own only when it runs inside the allocation (not with "
				   "--jobid from outside it)",
				   job_id, host, msg);
		break;
	default:
		/* A node error, a refusal (MUNGE) or a version mismatch: the
		 * status's name would tell the user nothing. */
		squash_step_fail("squash: job %u: node %s cannot provide this job's images: %s"
				 SQUASH_ASK_ADMIN, job_id, host, msg, host);
		break;
	}
}

int squash_step_setup(spank_t sp, const char *option,
		      const struct squash_settings *s)
{
	struct squash_client_options opts = squash_settings_client(s);
	Squash__StepInfoRequest info = SQUASH__STEP_INFO_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp = NULL;
	char host[256] = "?", why[1536];
	pid_t squashd_pid = 0;
	uint32_t job_id;
	uid_t uid;

	opts.peer_pid = &squashd_pid;
	if (!option)
		return 0; /* jobs without --squash-image never contact squashd */
	if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
		squash_step_fail("squash: cannot tell this step's job; the job cannot use --squash-image");
		return 0;
	}
	gethostname(host, sizeof host - 1);

	info.job_id = job_id;
	/* srun --squash-image inside an allocation: the step's own images. */
	if (squash_step_images_mount(sp, s, job_id, uid, &info, why, sizeof why) != 0) {
		squash_step_fail("squash: job %u: node %s: %s", job_id, host, why);
		return 0;
	}
	req.op_case = SQUASH__REQUEST__OP_STEP_INFO;
	req.step_info = &info;
	if (squash_client_call_retry(&opts, &req, &resp, NULL, why, sizeof why) != 0) {
		squash_step_fail("squash: job %u: squashd on node %s is not reachable: %s; the job "
				 "cannot use --squash-image there" SQUASH_ASK_ADMIN, job_id, host, why, host);
		return 0;
	}
	if (resp->status == SQUASH__STATUS__NOT_FOUND &&
	    squash_job_mount_late(sp, s, job_id, (uint32_t)uid) >= 0) {
		/* squashd now has the job's record (its mounts, or why they
		 * failed), as after a prolog: ask again. */
		squash__response__free_unpacked(resp, NULL);
		resp = NULL;
		if (squash_client_call_retry(&opts, &req, &resp, NULL, why, sizeof why) != 0) {
			squash_step_fail("squash: job %u: squashd on node %s is not reachable: %s; the "
					 "job cannot use --squash-image there" SQUASH_ASK_ADMIN, job_id,
					 host, why, host);
			return 0;
		}
	}
	if (resp->status != SQUASH__STATUS__OK)
		explain(s, job_id, host, resp);
	else if (resp->has_job_uid && resp->job_uid != (uint32_t)uid)
		/* A stale record under a reused job id must not be handed over. */
		squash_step_fail("squash: job %u: squashd on node %s holds images of uid %u for this "
				 "job id, not of uid %u (a stale record)" SQUASH_ASK_ADMIN, job_id, host,
				 resp->job_uid, (unsigned)uid, host);
	else {
		prepare(sp, job_id, resp, squashd_pid);
		if (kept.resp == resp)
			resp = NULL; /* kept for the tasks */
	}
	if (resp)
		squash__response__free_unpacked(resp, NULL);
	return 0; /* the tasks report failures; see squash_step_task_init */
}

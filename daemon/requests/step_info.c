/* step_info (root: slurmstepd; a user for their own jobs): the mounts a
 * step binds: the job's, and with step_id the step's own, with the
 * directories the step needs (base, squashd's mount and sessions
 * directories, which the step detaches). NOT_FOUND when squashd has no
 * record of the job (the step then sends the prolog's request itself), or
 * the job's recorded USER_ERROR / NODE_ERROR. */
#include "config.h"

#include "core/holders.h"
#include "requests/requests.h"

/* Where the step finds things (the answer is OK). */
static void reply_dirs(struct request *rq, uid_t job_uid)
{
	rq->out->resp.base_dir = (char *)rq->cfg->base_dir;
	rq->out->resp.mount_dir = rq->ds->mount_dir;
	rq->out->resp.has_job_uid = true;
	rq->out->resp.job_uid = job_uid;
	rq->out->resp.sessions_dir = rq->ds->sessions_dir;
}

/* The job's part of the answer (lock held). */
static void reply_job(struct request *rq, uint32_t job_id)
{
	struct daemon_state *ds = rq->ds;
	/* Other users' jobs do not exist for this peer. */
	struct job_entry *job = holders_settled_job_locked(ds, job_id, rq->peer->uid, rq->deadline_ms);

	if (!job) {
		if (ds->state_lost[0])
			reply_error(rq->out, SQUASH__STATUS__NOT_FOUND,
				    /* "lost its registry": plugins (0.1.0 too) look for it */
				    "squashd on this node has no images for job %u; it lost its registry "
				    "when it last started: it could not read it (%s) and mounts nothing "
				    "until an admin has looked (squashctl health on the node; docs/admin.md, "
				    "\"Upgrading slurm-squash itself\")", job_id, ds->state_lost);
		else
			reply_error(rq->out, SQUASH__STATUS__NOT_FOUND,
				    "squashd on this node has no images for job %u", job_id);
	} else if (job->pending) {
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR,
			    "the job prolog's mount request for job %u is still at work", job_id);
	} else if (job->status != SQUASH__STATUS__OK) {
		reply_error(rq->out, job->status, "%s", job->message ? job->message : "mount failed");
	} else if (reply_add_mounts(rq->out, job) == 0) {
		reply_dirs(rq, job->uid);
	}
}

void request_step_info(struct request *rq)
{
	struct daemon_state *ds = rq->ds;
	const Squash__StepInfoRequest *req = rq->msg->step_info;

	pthread_mutex_lock(&ds->lock);
	reply_job(rq, req->job_id);
	if (!req->has_step_id) {
		pthread_mutex_unlock(&ds->lock);
		return;
	}
	struct job_entry *e = holders_settled_step_locked(ds, req->job_id, req->step_id, rq->peer->uid,
							  rq->deadline_ms);
	if (e && e->pending)
		e = NULL;
	if (rq->out->resp.status == SQUASH__STATUS__NOT_FOUND && e && req->job_without_images) {
		/* A job allocated without images: the step's are all there is. */
		reply_free(rq->out);
		reply_init(rq->out);
		reply_dirs(rq, e->uid);
	}
	if (rq->out->resp.status == SQUASH__STATUS__OK && e)
		reply_add_mounts(rq->out, e);
	pthread_mutex_unlock(&ds->lock);
}

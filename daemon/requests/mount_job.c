/* mount_job (root: the job prolog, or a step that found no record of its
 * job, from_step: then squashd watches for the job's end, which no epilog
 * may report): mounts or shares the job's images as the job's user and
 * records them against the job. A user error is kept with the job, so its steps
 * tell the user why; the answer says USER_ERROR or NODE_ERROR. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core/holders.h"
#include "core/job_end_watch.h"
#include "core/overlay.h"
#include "core/policy.h"
#include "requests/requests.h"
#include "util/log.h"

/* Whether job was made by the same request (a repeated prolog). */
static bool same_request(const struct job_entry *job, const Squash__MountJobRequest *req)
{
	if (job->uid != req->uid || (!job->pending && job->count != req->n_images))
		return false;
	for (size_t i = 0; i < job->count && i < req->n_images; i++)
		if (strcmp(job->images[i].image, req->images[i]->image) ||
		    strcmp(job->images[i].target, req->images[i]->target) ||
		    (!job->pending && job->images[i].writable !=
		     (req->images[i]->has_writable && req->images[i]->writable)) ||
		    (!job->pending && (!job->images[i].upper != !req->images[i]->upper ||
				       (job->images[i].upper &&
					strcmp(job->images[i].upper, req->images[i]->upper)))))
			return false;
	return true;
}

/* Answers a finished job's mount request again (lock held). */
static void reply_recorded(struct reply *out, const struct job_entry *job)
{
	if (job->status == SQUASH__STATUS__OK)
		reply_add_mounts(out, job);
	else
		reply_error(out, job->status, "%s", job->message ? job->message : "mount failed");
}

/* The end of the request (lock held): keep the job and answer, or keep it
 * failed and without mounts, or forget it when the stop cut it short. */
static void finish(struct request *rq, struct job_entry *job, enum result res, char *err,
		   size_t errlen)
{
	struct daemon_state *ds = rq->ds;
	const Squash__MountJobRequest *req = rq->msg->mount_job;

	/* "Mounted" is answered only once the registry that records it is on
	 * disk. The job stays pending until then (nobody else touches it), but
	 * is saved as made (settling); saves of a burst are grouped. */
	if (res == RESULT_OK) {
		job->settling = true;
		if (daemon_save_grouped_locked(ds) < 0) {
			snprintf(err, errlen, "squashd on this node cannot save its registry (%s); "
				 "the job's mounts were undone", ds->save_error);
			res = RESULT_NODE_ERROR;
		}
		job->settling = false;
	}
	holders_settle_locked(ds, job);
	if (res == RESULT_OK) {
		log_info("job %u: %zu image(s) ready for uid %u", req->job_id, job->count, (unsigned)req->uid);
		reply_add_mounts(rq->out, job);
	} else if (ds->stopping) {
		/* Cut short by the stop, not failed: forget the job so that the
		 * client's retry, answered by the next squashd, starts afresh. */
		log_info("job %u: mount request cut short by the stop (%s); the client asks again",
			 req->job_id, err);
		holders_drop_locked(ds, job, rq->td);
		reply_error(rq->out, SQUASH__STATUS__UNAVAILABLE, "squashd is stopping");
		daemon_save_locked(ds);
	} else {
		/* Keep the job, failed and without mounts, so its steps can tell
		 * the user why; the epilog's release (or gc) removes it. */
		if (res == RESULT_NODE_ERROR)
			log_error("job %u (uid %u): %s", req->job_id, (unsigned)req->uid, err);
		else
			log_info("job %u (uid %u) refused: %s", req->job_id, (unsigned)req->uid, err);
		holders_fail_job_locked(ds, job, reply_status_of(res), err, rq->td);
		reply_error(rq->out, reply_status_of(res), "%s", err);
		daemon_save_locked(ds);
	}
}

void request_mount_job(struct request *rq)
{
	struct daemon_state *ds = rq->ds;
	const Squash__MountJobRequest *req = rq->msg->mount_job;
	char err[SQUASH_PATH_MAX + 1024];

	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = holders_find_job_locked(ds, req->job_id);
	/* A repeated prolog (slurmd retry, or our client retrying after a lost
	 * answer) gets the first request's answer, without new references. */
	while (job && job->pending && same_request(job, req) && daemon_wait_locked(ds, rq->deadline_ms))
		job = holders_find_job_locked(ds, req->job_id);
	if (job && job->pending) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(rq->out, ds->stopping ? SQUASH__STATUS__UNAVAILABLE : SQUASH__STATUS__NODE_ERROR,
			    ds->stopping ? "squashd is stopping" :
			    "another mount request for job %u is still at work on this node", req->job_id);
		return;
	}
	if (job && same_request(job, req)) {
		reply_recorded(rq->out, job);
		pthread_mutex_unlock(&ds->lock);
		return;
	}
	if (job) {
		/* A requeued job reusing its id: start from nothing. */
		log_info("job %u: replacing earlier mounts of this job id", req->job_id);
		holders_drop_locked(ds, job, rq->td);
	}
	Squash__Status refused = daemon_refuse_new_mounts_locked(ds, err, sizeof(err));
	if (refused != SQUASH__STATUS__OK) {
		pthread_mutex_unlock(&ds->lock);
		if (refused != SQUASH__STATUS__UNAVAILABLE)
			log_error("job %u (uid %u): refused: %s", req->job_id, (unsigned)req->uid, err);
		reply_error(rq->out, refused, "%s", err);
		return;
	}
	job = holders_add_job_locked(ds, req->job_id, req->uid);
	if (!job) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	pthread_mutex_unlock(&ds->lock);

	/* Unlocked: the job is pending, so a repeated request waits for this one. */
	enum result res = policy_check_mount_request(rq->cfg, req, err, sizeof(err));
	if (res == RESULT_OK)
		res = holders_mount_images(ds, rq->cfg, job, req->uid, req->images, req->n_images, NULL,
					   err, sizeof(err), rq->deadline_ms);
	if (res == RESULT_OK)
		res = overlay_job_mount(ds, rq->cfg, job, err, sizeof(err), rq->deadline_ms);

	pthread_mutex_lock(&ds->lock);
	finish(rq, job, res, err, sizeof(err));
	bool watch = req->has_from_step && req->from_step && !ds->stopping;
	pthread_mutex_unlock(&ds->lock);
	/* Mounted, or failed and kept for its steps to explain: either way
	 * the record goes when the job ends here. */
	if (watch)
		job_end_watch(ds, req->job_id, req->uid);
}

/* A step's own images (srun --squash-image inside an allocation), kept in
 * a registry entry of their own (kind step, keyed by job and step id):
 *   mount_job with step_id (root: the step's slurmstepd): mounts or shares
 *     them as the job's user, refusing a target that clashes with a job
 *     image's; the asking slurmstepd's pidfd releases the step if it dies
 *     (core/holder_watch.h);
 *   release_job with step_id (root: the step's end): drops them; OK also
 *     for an unknown step. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core/holder_watch.h"
#include "core/holders.h"
#include "core/policy.h"
#include "requests/requests.h"
#include "requests/scoped.h"
#include "target.h"
#include "util/log.h"

/* Refuses what the step may not have next to its job's images (lock
 * held): a clashing target, or more images than a job may have. Marks in
 * skip the images the job's own mounts serve. Returns false with the
 * answer set. */
static bool fits_job(struct request *rq, const struct job_entry *job, bool *skip, const char *who)
{
	const Squash__MountJobRequest *req = rq->msg->mount_job;
	char clash[SQUASH_PATH_MAX * 4 + 256];
	size_t n_new = 0;

	for (size_t i = 0; job && i < req->n_images; i++) {
		const Squash__ImageSpec *spec = req->images[i];
		for (size_t k = 0; k < job->count && !skip[i]; k++) {
			const struct job_image *ji = &job->images[k];
			int r = squash_step_target_clash(ji->image, ji->target, spec->image, spec->target,
							 clash, sizeof(clash));
			skip[i] = r > 0; /* the job's mount already serves it */
			if (r < 0) {
				log_info("%s (uid %u) refused: target %s clashes with job image %s at %s", who,
					 (unsigned)req->uid, spec->target, ji->image, ji->target);
				reply_error(rq->out, SQUASH__STATUS__USER_ERROR, "step image %s: %s",
					    spec->image, clash);
				return false;
			}
		}
		n_new += !skip[i];
	}
	/* The step_info answer carries both lists (request_codec.c). */
	size_t text = 0;
	for (size_t k = 0; job && k < job->count; k++)
		text += strlen(job->images[k].image) + strlen(job->images[k].target) + 2;
	for (size_t i = 0; i < req->n_images; i++)
		text += skip[i] ? 0 : strlen(req->images[i]->image) + strlen(req->images[i]->target) + 2;
	if (text > SQUASH_OPTION_MAX) {
		reply_error(rq->out, SQUASH__STATUS__USER_ERROR,
			    "the job's and the step's image lists are too long together (%zu bytes of "
			    "paths, at most %d)", text, SQUASH_OPTION_MAX);
		return false;
	}
	if ((job ? job->count : 0) + n_new > rq->cfg->max_images_per_job) {
		reply_error(rq->out, SQUASH__STATUS__USER_ERROR,
			    "too many images: the job's %zu and the step's %zu (this node allows at most %u "
			    "per job, its steps' own images included)", job ? job->count : 0, n_new,
			    rq->cfg->max_images_per_job);
		return false;
	}
	return true;
}

/* Finds or makes the step's pending entry (lock held); NULL with the
 * answer set. */
static struct job_entry *new_step_locked(struct request *rq, bool *skip, const char *who)
{
	struct daemon_state *ds = rq->ds;
	const Squash__MountJobRequest *req = rq->msg->mount_job;
	char why[PATH_MAX + 512];

	struct job_entry *e = holders_settled_step_locked(ds, req->job_id, req->step_id, 0, rq->deadline_ms);
	if (e && e->pending) {
		reply_error(rq->out, ds->stopping ? SQUASH__STATUS__UNAVAILABLE : SQUASH__STATUS__NODE_ERROR,
			    "another mount request for step %u.%u is still at work", req->job_id, req->step_id);
		return NULL;
	}
	if (e) /* a retry after a lost answer: start again */
		holders_drop_locked(ds, e, rq->td);
	struct job_entry *job = holders_settled_job_locked(ds, req->job_id, 0, rq->deadline_ms);
	Squash__Status refused = daemon_refuse_new_mounts_locked(ds, why, sizeof(why));
	if (refused != SQUASH__STATUS__OK) {
		reply_error(rq->out, refused, "%s", why);
		return NULL;
	}
	if (holders_find_step_locked(ds, req->job_id, req->step_id)) {
		/* Another request for this step came in while we waited. */
		reply_error(rq->out, SQUASH__STATUS__UNAVAILABLE, "another mount request for step %u.%u "
			    "came first; ask again", req->job_id, req->step_id);
		return NULL;
	}
	if (job && job->uid != req->uid) {
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR,
			    "job %u belongs to uid %u on this node, not to uid %u", req->job_id,
			    (unsigned)job->uid, (unsigned)req->uid);
		return NULL;
	}
	if (!fits_job(rq, job, skip, who))
		return NULL;
	/* The asking slurmstepd: if it dies without its end of step (killed
	 * hard), its pidfd tells, and the step's images go with it. */
	e = holders_add_step_locked(ds, req->job_id, req->step_id, req->uid, rq->peer->pid,
				    holder_start_time(rq->peer->pid));
	if (!e)
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR, "out of memory");
	return e;
}

void request_mount_step(struct request *rq)
{
	struct daemon_state *ds = rq->ds;
	const Squash__MountJobRequest *req = rq->msg->mount_job;
	char err[SQUASH_PATH_MAX * 2 + 1024], who[64];
	bool skip[SQUASH_MAX_IMAGES] = { false };

	snprintf(who, sizeof(who), "step %u.%u", req->job_id, req->step_id);
	enum result res = policy_check_mount_request(rq->cfg, req, err, sizeof(err));
	if (res != RESULT_OK) {
		log_info("%s (uid %u) refused: %s", who, (unsigned)req->uid, err);
		reply_error(rq->out, reply_status_of(res), "%s", err);
		return;
	}
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = new_step_locked(rq, skip, who);
	pthread_mutex_unlock(&ds->lock);
	if (!e)
		return;

	res = holders_mount_images(ds, rq->cfg, e, req->uid, req->images, req->n_images, skip, err,
				   sizeof(err), rq->deadline_ms);

	pthread_mutex_lock(&ds->lock);
	scoped_finish_locked(rq, e, res, err, sizeof(err), who);
	bool kept = rq->out->resp.status == SQUASH__STATUS__OK && e->session_start;
	struct job_entry copy = kept ? *e : (struct job_entry){ 0 };
	pthread_mutex_unlock(&ds->lock);
	int pidfd = kept ? holder_peer_pidfd(rq->fd, rq->peer->pid) : -1;
	if (kept && (pidfd < 0 || holder_watch(ds, &copy, pidfd) < 0))
		log_warning("%s: cannot watch its slurmstepd (pid %d); gc releases the step if it dies",
			    who, (int)rq->peer->pid);
}

void request_release_step(struct request *rq)
{
	struct daemon_state *ds = rq->ds;
	uint32_t job_id = rq->msg->release_job->job_id, step_id = rq->msg->release_job->step_id;

	pthread_mutex_lock(&ds->lock);
	enum holder_release r = holders_release_step_locked(ds, job_id, step_id, rq->td);
	pthread_mutex_unlock(&ds->lock);
	if (r == HOLDER_RELEASED)
		log_info("step %u.%u released", job_id, step_id);
	else if (r == HOLDER_PENDING)
		reply_error(rq->out, SQUASH__STATUS__UNAVAILABLE,
			    "the mount request of step %u.%u is still at work; ask again", job_id, step_id);
	else
		reply_error(rq->out, SQUASH__STATUS__OK, "step %u.%u has no mounts of its own on this node",
			    job_id, step_id);
}

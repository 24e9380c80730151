/* release_job (root: the job epilog): drops the job's references and its
 * steps'; answered at once, the worker then unmounts what went
 * unreferenced. OK also for a job squashd does not know (idempotent). */
#include "config.h"

#include "core/holders.h"
#include "requests/requests.h"
#include "util/log.h"

void request_release_job(struct request *rq)
{
	struct daemon_state *ds = rq->ds;
	uint32_t job_id = rq->msg->release_job->job_id;

	pthread_mutex_lock(&ds->lock);
	holders_settled_job_locked(ds, job_id, rq->peer->uid, rq->deadline_ms);
	enum holder_release r = holders_release_job_locked(ds, job_id, rq->td);
	pthread_mutex_unlock(&ds->lock);
	if (r == HOLDER_RELEASED)
		log_info("job %u released", job_id);
	else if (r == HOLDER_PENDING)
		reply_error(rq->out, SQUASH__STATUS__UNAVAILABLE,
			    "the mount request of job %u is still at work; ask again", job_id);
	else
		reply_error(rq->out, SQUASH__STATUS__OK, "job %u has no mounts on this node", job_id);
}

/* session_mount (any user, for itself: squash-shell): mounts or shares
 * the images as the asking process's user with the job policy, binds them
 * for that user alone (core/sessions.h) and releases them when that
 * process exits, however it exits (its pidfd, core/holder_watch.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/holder_watch.h"
#include "core/holders.h"
#include "core/owner_teardown.h"
#include "core/policy.h"
#include "core/sessions.h"
#include "requests/requests.h"
#include "requests/scoped.h"
#include "util/log.h"

/* A session whose process is gone, under the pid of the process that asks
 * now (lock held): its release waits on its owner's thread, which that
 * user may keep busy, and must not keep whoever gets the pid next (any
 * user) from a session. Dropped here; its mounts go to *stale, to be torn
 * down on its owner's thread (*stale_uid). */
static void drop_ended_session_locked(struct daemon_state *ds, pid_t pid, unsigned long long start,
				      struct teardown *stale, uid_t *stale_uid)
{
	struct job_entry *old = holders_find_session_locked(ds, pid);

	if (!old || old->pending || old->session_start == start)
		return;
	log_info("session of pid %d (uid %u) ended; releasing its %zu image(s) for a new process "
		 "with that pid", (int)pid, (unsigned)old->uid, old->count);
	*stale_uid = old->uid;
	holders_drop_locked(ds, old, stale);
	daemon_save_locked(ds);
}

/* The session's pending entry (lock held); NULL with the answer set. */
static struct job_entry *new_session_locked(struct request *rq, unsigned long long start,
					    struct teardown *stale, uid_t *stale_uid)
{
	struct daemon_state *ds = rq->ds;
	const struct peer *peer = rq->peer;
	char why[PATH_MAX + 512];

	Squash__Status refused = daemon_refuse_new_mounts_locked(ds, why, sizeof(why));
	if (refused != SQUASH__STATUS__OK) {
		reply_error(rq->out, refused, "%s", why);
		return NULL;
	}
	drop_ended_session_locked(ds, peer->pid, start, stale, stale_uid);
	unsigned mine = holders_sessions_of_locked(ds, peer->uid);
	if (holders_find_session_locked(ds, peer->pid) || (peer->uid != 0 && mine >= HOLDERS_SESSIONS_PER_USER)) {
		reply_error(rq->out, SQUASH__STATUS__USER_ERROR,
			    mine >= HOLDERS_SESSIONS_PER_USER ? "too many squash-shell sessions of this user on this node (at most %d)"
			    : "this process already holds a session (pid %d)",
			    mine >= HOLDERS_SESSIONS_PER_USER ? HOLDERS_SESSIONS_PER_USER : (int)peer->pid);
		return NULL;
	}
	struct job_entry *e = holders_add_session_locked(ds, peer->uid, peer->pid, start);
	if (!e)
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR, "out of memory");
	return e;
}

/* Undoes a session that cannot be kept (lock not held) and answers why. */
static void give_up(struct request *rq, Squash__Status status, const char *why)
{
	struct daemon_state *ds = rq->ds;

	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = holders_find_session_locked(ds, rq->peer->pid);
	if (e)
		holders_drop_locked(ds, e, rq->td);
	daemon_save_locked(ds);
	pthread_mutex_unlock(&ds->lock);
	reply_free(rq->out);
	reply_error(rq->out, status, "%s", why);
}

void request_session_mount(struct request *rq)
{
	struct daemon_state *ds = rq->ds;
	const struct peer *peer = rq->peer;
	const Squash__SessionMountRequest *req = rq->msg->session_mount;
	Squash__MountJobRequest as_job = SQUASH__MOUNT_JOB_REQUEST__INIT;
	char err[SQUASH_PATH_MAX * 2 + 1024], who[64];

	snprintf(who, sizeof(who), "session of pid %d", (int)peer->pid);
	errno = 0;
	as_job.uid = peer->uid;
	as_job.n_images = req->n_images;
	as_job.images = req->images;
	enum result res = policy_check_mount_request(rq->cfg, &as_job, err, sizeof(err));
	if (res != RESULT_OK) {
		log_peer_info(peer->user, "%s (uid %u) refused: %s", who, (unsigned)peer->uid, err);
		reply_error(rq->out, reply_status_of(res), "%s", err);
		return;
	}
	int pidfd = holder_peer_pidfd(rq->fd, peer->pid);
	unsigned long long start = holder_start_time(peer->pid);
	if (pidfd < 0 || peer->pid <= 0 || start == 0) {
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR,
			    "cannot watch the requesting process (pid %d): %s", (int)peer->pid,
			    strerror(errno ? errno : ESRCH));
		if (pidfd >= 0)
			close(pidfd);
		return;
	}
	struct teardown stale = TEARDOWN_INIT(rq->cfg);
	uid_t stale_uid = 0;
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = new_session_locked(rq, start, &stale, &stale_uid);
	pthread_mutex_unlock(&ds->lock);
	owner_teardown(ds, &stale, stale_uid);
	if (!e) {
		close(pidfd);
		return;
	}

	res = holders_mount_images(ds, rq->cfg, e, peer->uid, req->images, req->n_images, NULL, err,
				   sizeof(err), rq->deadline_ms);

	pthread_mutex_lock(&ds->lock);
	scoped_finish_locked(rq, e, res, err, sizeof(err), who);
	bool kept = rq->out->resp.status == SQUASH__STATUS__OK;
	struct job_entry copy = kept ? *e : (struct job_entry){ 0 };
	pthread_mutex_unlock(&ds->lock);
	if (!kept) {
		close(pidfd);
		return;
	}
	if (sessions_bind(ds, &copy, rq->out->session_dir, sizeof(rq->out->session_dir), err,
			  sizeof(err)) < 0) {
		log_error("%s: %s", who, err);
		give_up(rq, SQUASH__STATUS__NODE_ERROR, err);
		close(pidfd);
		return;
	}
	rq->out->resp.session_dir = rq->out->session_dir;
	/* After the entry is complete: a process that is already gone fires
	 * at once and releases it. A session nobody can end must not exist. */
	if (holder_watch(ds, &copy, pidfd) < 0) {
		log_error("%s: cannot watch the process; releasing its images", who);
		give_up(rq, SQUASH__STATUS__NODE_ERROR, "squashd cannot watch the session's process");
	}
}

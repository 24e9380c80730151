#include "config.h"
#include "server/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "clock.h"
#include "core/holders.h"
#include "core/owner_teardown.h"
#include "core/policy.h"
#include "core/request_stats.h"
#include "core/sharing.h"
#include "core/user_fds.h"
#include "frame.h"
#include "request_codec.h"
#include "requests/requests.h"
#include "server/credential.h"
#include "util/log.h"

/* Journal fields (JOB_ID, USER_ID) for every line this request logs. */
static void log_context_request(const Squash__Request *req)
{
	if (req->op_case == SQUASH__REQUEST__OP_MOUNT_JOB)
		log_context_job(req->mount_job->job_id, (long)req->mount_job->uid);
	else if (req->op_case == SQUASH__REQUEST__OP_STEP_INFO)
		log_context_job(req->step_info->job_id, -1);
	else if (req->op_case == SQUASH__REQUEST__OP_RELEASE_JOB)
		log_context_job(req->release_job->job_id, -1);
}

/* The request kinds: which file answers which request (requests/). A
 * mount or release with a step id concerns that step's own images. */
static const struct request_kind {
	Squash__Request__OpCase op;
	bool step; /* mount_job / release_job with step_id */
	const char *name;
	void (*handle)(struct request *rq);
} request_kinds[] = {
	{ SQUASH__REQUEST__OP_MOUNT_JOB, false, "mount", request_mount_job },
	{ SQUASH__REQUEST__OP_MOUNT_JOB, true, "mount", request_mount_step },
	{ SQUASH__REQUEST__OP_RELEASE_JOB, false, "release", request_release_job },
	{ SQUASH__REQUEST__OP_RELEASE_JOB, true, "release", request_release_step },
	{ SQUASH__REQUEST__OP_STEP_INFO, false, "step_info", request_step_info },
	{ SQUASH__REQUEST__OP_SESSION_MOUNT, false, "session_mount", request_session_mount },
	{ SQUASH__REQUEST__OP_GC, false, "gc", request_gc },
	{ SQUASH__REQUEST__OP_LIST, false, "list", request_list },
	{ SQUASH__REQUEST__OP_STATUS, false, "status", request_status },
};

static const struct request_kind *kind_of(const Squash__Request *req)
{
	bool step = (req->op_case == SQUASH__REQUEST__OP_MOUNT_JOB && req->mount_job->has_step_id) ||
		    (req->op_case == SQUASH__REQUEST__OP_RELEASE_JOB && req->release_job->has_step_id);

	for (size_t i = 0; i < sizeof(request_kinds) / sizeof(request_kinds[0]); i++)
		if (request_kinds[i].op == req->op_case && request_kinds[i].step == step)
			return &request_kinds[i];
	return NULL;
}

/* The user root's request works for (user_queues.h): the job's for a
 * request about a job, else root. */
static uid_t worked_for(struct daemon_state *ds, const Squash__Request *req)
{
	uint32_t job_id, step_id = 0;
	bool step = false;

	if (req->op_case == SQUASH__REQUEST__OP_MOUNT_JOB)
		return req->mount_job->uid;
	if (req->op_case == SQUASH__REQUEST__OP_RELEASE_JOB) {
		job_id = req->release_job->job_id;
		step = req->release_job->has_step_id;
		step_id = req->release_job->step_id;
	} else if (req->op_case == SQUASH__REQUEST__OP_STEP_INFO) {
		job_id = req->step_info->job_id;
		step = req->step_info->has_step_id;
		step_id = req->step_info->step_id;
	} else {
		return 0;
	}
	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = holders_find_job_locked(ds, job_id);
	/* A job that asked for no images has no record; its steps' own
	 * images do, and their release may wait on the user's reader. */
	if (!job && step)
		job = holders_find_step_locked(ds, job_id, step_id);
	uid_t uid = job ? job->uid : 0;
	pthread_mutex_unlock(&ds->lock);
	return uid;
}

static const char *op_name(Squash__Request__OpCase op)
{
	for (size_t i = 0; i < sizeof(request_kinds) / sizeof(request_kinds[0]); i++)
		if (request_kinds[i].op == op)
			return request_kinds[i].name;
	return "unknown";
}

uid_t server_worked_for(struct daemon_state *ds, const struct peer *peer, const uint8_t *buf,
			size_t len, bool *release)
{
	struct squash_decoded_request d;
	Squash__Status status;
	char err[256];

	*release = false;
	/* Anyone else's works for the user answering for the peer: its uid,
	 * or the owner of the user namespace it runs in (a user's subordinate
	 * uids share that user's request slots and descriptors). */
	if (peer->uid != 0)
		return peer->user;
	/* Root's frame is decoded once more by its worker: a few
	 * microseconds, and nothing decoded is shared between threads. */
	if (squash_request_decode(buf, len, &d, &status, err, sizeof(err)) < 0)
		return 0;
	uid_t uid = worked_for(ds, d.request);
	*release = d.request->op_case == SQUASH__REQUEST__OP_RELEASE_JOB;
	squash_decoded_request_free(&d);
	return uid;
}

/* Images a request would mount (the descriptors budget, user_fds.h). */
static unsigned images_to_mount(const Squash__Request *req)
{
	if (req->op_case == SQUASH__REQUEST__OP_MOUNT_JOB)
		return (unsigned)req->mount_job->n_images;
	if (req->op_case == SQUASH__REQUEST__OP_SESSION_MOUNT)
		return (unsigned)req->session_mount->n_images;
	return 0;
}

void server_answer(struct daemon_state *ds, int fd, const struct peer *peer, const uint8_t *buf,
		   size_t len, uid_t uid, long long deadline_ms)
{
	struct reply *out = malloc(sizeof(*out));
	struct squash_decoded_request d;
	/* The request's settings, held until it is done (settings.h). */
	const struct squashd_config *cfg = settings_hold();
	struct teardown td = TEARDOWN_INIT(cfg);
	Squash__Status status;
	Squash__Request__OpCase op = SQUASH__REQUEST__OP__NOT_SET;
	char err[SQUASH_PATH_MAX + 256];
	long long start = squash_now_ms(), start_us = request_stats_now_us();

	if (!out) {
		log_error("out of memory answering uid %u pid %d", (unsigned)peer->uid, (int)peer->pid);
		settings_drop(cfg);
		return;
	}
	reply_init(out);
	if (squash_request_decode(buf, len, &d, &status, err, sizeof(err)) < 0) {
		log_peer_warning(peer->user, "bad request from uid %u pid %d: %s", (unsigned)peer->uid,
				 (int)peer->pid, err);
		reply_error(out, status, "%s", err);
	} else if (credential_verify(d.signed_request, peer, cfg->require_munge,
				     cfg->munge_socket, err, sizeof(err)) < 0 ||
		   !policy_may_send(peer, d.request->op_case, err, sizeof(err))) {
		log_peer_warning(peer->user, "refused request from uid %u pid %d: %s", (unsigned)peer->uid,
				 (int)peer->pid, err);
		reply_error(out, SQUASH__STATUS__DENIED, "%s", err);
		op = d.request->op_case; /* counted under its kind, as a failure */
	} else {
		const struct request_kind *kind = kind_of(d.request);
		struct request rq = {
			.ds = ds, .cfg = cfg, .peer = peer, .fd = fd, .msg = d.request,
			.deadline_ms = deadline_ms,
			.out = out, .td = &td,
		};
		op = d.request->op_case;
		log_context_request(d.request);
		/* A user's own request: what it logs is on that user's budget. */
		log_context_peer(peer->user);
		uint64_t reserved = 0;
		if (!user_fds_reserve(ds, cfg, uid, images_to_mount(d.request), &reserved, err, sizeof(err))) {
			log_peer_warning(peer->user, "%s from uid %u pid %d for uid %u refused: %s",
					 op_name(op), (unsigned)peer->uid, (int)peer->pid, (unsigned)uid, err);
			reply_error(out, SQUASH__STATUS__USER_ERROR, "%s", err);
		} else {
			pthread_mutex_lock(&ds->lock);
			ds->requests_in_progress++;
			pthread_mutex_unlock(&ds->lock);
			if (kind)
				kind->handle(&rq);
			else
				reply_error(out, SQUASH__STATUS__BAD_REQUEST, "unknown request");
			pthread_mutex_lock(&ds->lock);
			ds->requests_in_progress--;
			pthread_mutex_unlock(&ds->lock);
			user_fds_unreserve(uid, reserved);
		}
	}
	/* A peer of another protocol version gets its refusal in its own
	 * version, whose status and message it can read (proto/frame.h). */
	if (squash_response_send_version(fd, out->resp.status == SQUASH__STATUS__VERSION_MISMATCH
					 ? d.peer_version : SQUASH_PROTOCOL_VERSION, &out->resp) < 0)
		log_debug("could not answer uid %u pid %d: %s", (unsigned)peer->uid,
			  (int)peer->pid, strerror(errno));
	pthread_mutex_lock(&ds->lock);
	ds->requests++;
	ds->requests_failed += out->resp.status != SQUASH__STATUS__OK;
	pthread_mutex_unlock(&ds->lock);
	request_stats_record(op, out->resp.status == SQUASH__STATUS__OK, request_stats_now_us() - start_us);
	log_debug("%s from uid %u pid %d: %s in %lld ms", op_name(op), (unsigned)peer->uid,
		  (int)peer->pid, squash_status_name(out->resp.status), squash_now_ms() - start);
	reply_free(out);
	free(out);
	squash_decoded_request_free(&d);
	/* After the answer, on the mounts' owners' threads: the epilog need
	 * not wait for the unmounts, and a worker never waits for a user's
	 * stopped reader to exit (each up to request_timeout), which held the
	 * user's places in max_requests_per_user that the user's epilog
	 * release needs. */
	td.log_peer = peer->user;
	owners_teardown(ds, &td);
	settings_drop(cfg);
	log_context_clear();
}

void server_refuse_oversized(int fd, const struct peer *peer)
{
	struct reply *out = malloc(sizeof(*out));

	log_peer_warning(peer->user, "bad request from uid %u pid %d: larger than %d bytes",
			 (unsigned)peer->uid, (int)peer->pid, SQUASH_FRAME_MAX);
	if (!out)
		return;
	reply_init(out);
	reply_error(out, SQUASH__STATUS__BAD_REQUEST, "request larger than %d bytes", SQUASH_FRAME_MAX);
	squash_response_send(fd, &out->resp);
	request_stats_record(SQUASH__REQUEST__OP__NOT_SET, false, 0);
	free(out);
}

void server_refuse(int fd, const struct peer *peer, Squash__Status status, const char *fmt, ...)
{
	struct reply *out = malloc(sizeof(*out));
	char why[1024];
	va_list ap;

	if (!out)
		return;
	reply_init(out);
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	reply_error(out, status, "%s", why);
	if (squash_response_send(fd, &out->resp) < 0)
		log_debug("could not answer uid %u pid %d: %s", (unsigned)peer->uid, (int)peer->pid,
			  strerror(errno));
	request_stats_record(SQUASH__REQUEST__OP__NOT_SET, false, 0);
	reply_free(out);
	free(out);
}

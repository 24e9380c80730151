/* One file per request kind: each handler parses what it needs from the
 * request, validates it, checks policy, acts on the core (core/) and
 * builds the answer, in one function. The server (server/server.c) finds
 * the handler in its table of request kinds; who may send which request
 * (core/policy.h) and the MUNGE check come before.
 *
 *   request                         file
 *   mount_job                       requests/mount_job.c
 *   mount_job with step_id          requests/step_images.c
 *   release_job                     requests/release_job.c
 *   release_job with step_id        requests/step_images.c
 *   step_info                       requests/step_info.c
 *   session_mount                   requests/session_mount.c
 *   gc                              requests/gc.c
 *   list                            requests/list.c
 *   status                          requests/status.c
 */
#ifndef SQUASHD_REQUESTS_H
#define SQUASHD_REQUESTS_H

#include "core/daemon.h"
#include "requests/reply.h"
#include "squash.pb-c.h"
#include "util/peer.h"

/* One request being served by a worker. */
struct request {
	struct daemon_state *ds;
	const struct squashd_config *cfg; /* the snapshot held for the request (settings.h) */
	const struct peer *peer;          /* who asks (SO_PEERCRED) */
	int fd;                           /* the connection (SO_PEERPIDFD) */
	const Squash__Request *msg;
	long long deadline_ms;            /* monotonic: every wait gives up then */
	struct reply *out;
	struct teardown *td;              /* undone after the answer is sent */
};

void request_mount_job(struct request *rq);
void request_release_job(struct request *rq);
void request_step_info(struct request *rq);
void request_mount_step(struct request *rq);
void request_release_step(struct request *rq);
void request_session_mount(struct request *rq);
void request_gc(struct request *rq);
void request_list(struct request *rq);
void request_status(struct request *rq);

#endif

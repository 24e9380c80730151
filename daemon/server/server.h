/* squashd's request table: one request frame, read by the main loop
 * (server/connections.h) and started on a worker (server/user_queues.h),
 * is decoded, its MUNGE credential and sender checked
 * (server/credential.h, core/policy.h), handed to the file that answers
 * its kind (requests/), answered, counted, and what the request released
 * is torn down after the answer. */
#ifndef SQUASHD_SERVER_H
#define SQUASHD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/daemon.h"
#include "util/peer.h"

/* The user the request in buf works for (user_queues.h): the user
 * answering for the peer (peer.user), or for root's requests about a job
 * that job's user; 0 for nobody.
 * *release: it is root's release (an epilog), which only gives back. */
uid_t server_worked_for(struct daemon_state *ds, const struct peer *peer, const uint8_t *buf,
			size_t len, bool *release);

/* Serves the request in buf (len bytes) from peer for uid and answers on
 * fd; the request gives up at deadline_ms (monotonic). */
void server_answer(struct daemon_state *ds, int fd, const struct peer *peer, const uint8_t *buf,
		   size_t len, uid_t uid, long long deadline_ms);

/* Answers fd status and the message, before any decoding (main loop). */
void server_refuse(int fd, const struct peer *peer, Squash__Status status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Answers a request frame longer than SQUASH_FRAME_MAX: BAD_REQUEST. */
void server_refuse_oversized(int fd, const struct peer *peer);

#endif

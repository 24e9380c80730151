/* squashd's request table: one request frame, read by a worker
 * (server/workers.h), is decoded, its MUNGE credential and sender checked
 * (server/credential.h, core/policy.h), handed to the file that answers
 * its kind (requests/), answered, counted, and what the request released
 * is torn down after the answer. */
#ifndef SQUASHD_SERVER_H
#define SQUASHD_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/daemon.h"
#include "util/peer.h"

/* Serves the request in buf (len bytes) from peer and answers on fd. */
void server_answer(struct daemon_state *ds, int fd, const struct peer *peer, const uint8_t *buf,
		   size_t len);

/* Answers a request frame longer than SQUASH_FRAME_MAX: BAD_REQUEST. */
void server_refuse_oversized(int fd, const struct peer *peer);

#endif

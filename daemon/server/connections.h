/* The connections squashd has open, and those the main loop is still
 * reading a request from (issue 37). Reading never takes a thread: every
 * connection is non-blocking; its one request frame is read as it is
 * accepted when it is there already (clients send as they connect), else
 * polled by the main loop until it arrives or its idle time
 * (CONNECTION_IDLE_MS) runs out, so a slow or silent peer holds one
 * descriptor and nothing else. A non-root peer may have at most
 * MAX_SENDING_PER_USER connections that have not sent their request yet;
 * once sent, a request counts against its user's max_requests_per_user
 * and max_queued_per_user (user_queues.h), which refuse it with a reason.
 * Every connection counts against MAX_CONNECTIONS, past which new ones
 * wait in the listen backlog; root (slurmd, slurmstepd) is never refused.
 * Budgets per uid multiply with the uids a user can have (a subordinate
 * range of 65,536 for rootless containers), so all non-root peers
 * together get at most MAX_SENDING_USERS silent connections and leave
 * the last ROOT_CONNECTIONS of the table to root: Slurm's prologs,
 * epilogs and steps are accepted whatever users hold. */
#ifndef SQUASHD_CONNECTIONS_H
#define SQUASHD_CONNECTIONS_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/peer.h"

#define MAX_SENDING_PER_USER 16
#define MAX_SENDING_USERS 1024
#define MAX_CONNECTIONS 4096
#define ROOT_CONNECTIONS 256
#define CONNECTION_IDLE_MS 5000

/* What the main loop does with a request frame read from fd:
 * got(arg, fd, peer, frame, len, rc) with rc a squash_frame_recv result
 * (SQUASH_FRAME_OK or SQUASH_FRAME_ETOOBIG) or CONNECTION_STARVED; the
 * connection is got's to close. */
typedef void (*connection_got_fn)(void *arg, int fd, const struct peer *peer, const uint8_t *frame,
				  size_t len, int rc);

/* Closes a connection connection_take took (any thread). */
void connection_close(int fd);

/* Whether MAX_CONNECTIONS are open. */
bool connections_full(void);

/* got's rc for a frame read from a connection accepted with squashd out
 * of descriptors (accept_guard.h): answered and closed, not served. It is
 * read first because closing a connection with its request unread resets
 * it, and the client would not see why. */
#define CONNECTION_STARVED 1

/* Takes fd, just accepted from peer (non-blocking; starved: see
 * CONNECTION_STARVED), main loop: its request goes to got at once when it
 * is there, else the main loop reads it later. False, fd closed, when the
 * peer closed it already, when a non-root peer already has
 * MAX_SENDING_PER_USER connections that have not sent theirs (or all
 * non-root peers MAX_SENDING_USERS), when a non-root peer would take one
 * of root's last ROOT_CONNECTIONS, or out of memory. */
bool connection_take(int fd, const struct peer *peer, bool starved, connection_got_fn got, void *arg);

/* How many are being read; fills pfd[0..n) with them for poll. */
size_t connections_reading(void);
void connections_poll_fill(struct pollfd *pfd);

/* After poll: reads every readable connection among pfd[0..n) (as filled
 * above) and hands its request to got; closes the ones closed or idle too
 * long by now_ms. */
void connections_read(const struct pollfd *pfd, size_t n, long long now_ms, connection_got_fn got,
		      void *arg);

/* The earliest idle deadline of a connection being read; -1 when none. */
long long connections_next_deadline(void);

/* Closes every connection being read (stopping). */
void connections_close_reading(void);

#endif

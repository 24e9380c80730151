/* The connections squashd has open, and those the main loop is still
 * reading a request from (issue 37). Reading never takes a thread: every
 * connection is non-blocking and polled by the main loop until its one
 * request frame arrived or its idle time (CONNECTION_IDLE_MS) ran out, so a
 * slow or silent peer holds one descriptor and nothing else. Non-root
 * peers get at most MAX_CONNECTIONS_PER_USER open at once; root (slurmd,
 * slurmstepd) is never refused but counts against MAX_CONNECTIONS, past
 * which new connections wait in the listen backlog. */
#ifndef SQUASHD_CONNECTIONS_H
#define SQUASHD_CONNECTIONS_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/peer.h"

#define MAX_CONNECTIONS_PER_USER 16
#define MAX_CONNECTIONS 4096
#define CONNECTION_IDLE_MS 5000

/* Counts an accepted connection of peer (main loop). False when the peer
 * is over its share: the caller closes it. */
bool connection_admit(const struct peer *peer);

/* Closes a connection connection_admit counted (any thread). */
void connection_close(int fd, const struct peer *peer);

/* Whether MAX_CONNECTIONS are open. */
bool connections_full(void);

/* got's rc for a frame read from a connection accepted with squashd out
 * of descriptors (accept_guard.h): answered and closed, not served. It is
 * read first because closing a connection with its request unread resets
 * it, and the client would not see why. */
#define CONNECTION_STARVED 1

/* Starts reading a request from fd (admitted, non-blocking); starved: see
 * CONNECTION_STARVED. False (fd left to the caller) when out of memory. */
bool connection_read_start(int fd, const struct peer *peer, bool starved);

/* How many are being read; fills pfd[0..n) with them for poll. */
size_t connections_reading(void);
void connections_poll_fill(struct pollfd *pfd);

/* After poll: reads every readable connection among pfd[0..n) (as filled
 * above) and calls got(arg, fd, peer, frame, len, rc) with rc a
 * squash_frame_recv result (SQUASH_FRAME_OK or SQUASH_FRAME_ETOOBIG) or
 * CONNECTION_STARVED (the connection is got's to close); closes the ones closed or idle too long
 * by now_ms. */
void connections_read(const struct pollfd *pfd, size_t n, long long now_ms,
		      void (*got)(void *arg, int fd, const struct peer *peer, const uint8_t *frame,
				  size_t len, int rc),
		      void *arg);

/* The earliest idle deadline of a connection being read; -1 when none. */
long long connections_next_deadline(void);

/* Closes every connection being read (stopping). */
void connections_close_reading(void);

#endif

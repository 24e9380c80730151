/* Client side of the squashd protocol: one request, one response, over a
 * fresh SOCK_SEQPACKET connection. Used by the SPANK plugin, squashctl and
 * the tests. */
#ifndef SQUASH_CLIENT_H
#define SQUASH_CLIENT_H

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>

#include "squash.pb-c.h"

#define SQUASH_DEFAULT_SOCKET "/run/squashd/squashd.sock"

struct squash_client_options {
	const char *socket_path;  /* NULL: SQUASH_DEFAULT_SOCKET */
	bool use_munge;           /* sign the request with a MUNGE credential */
	bool munge_if_present;    /* with use_munge: send the request unsigned when
	                           * this host has no munged socket at all (a
	                           * cluster on auth/slurm); squashd's
	                           * require_munge decides whether it may */
	const char *munge_socket; /* NULL: libmunge's default */
	int timeout_ms;           /* for connect+send+receive; <=0: 30000 */
	int retry_ms;             /* squash_client_call_retry: keep trying this long */
	pid_t *peer_pid;          /* when set: squashd's pid as this process's pid
	                           * namespace sees it (SO_PEERCRED; 0: not visible) */
};

/* Sends req and waits for the response. Returns 0 with *resp set (free with
 * squash__response__free_unpacked(*resp, NULL)) whatever the response's
 * status; returns -1 with a reason in err when no response could be had
 * (socket missing, daemon not running, timeout, version mismatch, garbage),
 * e.g. "cannot connect to squashd at /run/squashd/squashd.sock: No such file
 * or directory (is squashd running?)". A request squashd closed without
 * reading it (a burst of one user's connections) is sent again, up to five
 * times within 0.75 s. */
int squash_client_call(const struct squash_client_options *opts,
		       const Squash__Request *req, Squash__Response **resp,
		       char *err, size_t errlen);

/* Like squash_client_call, but while squashd cannot be reached (no socket,
 * refused, connection reset before the answer, munged not answering) or
 * answers UNAVAILABLE (stopping), tries again with a growing pause (0.1 s
 * doubling to 2 s) until opts->retry_ms have passed. A request that timed
 * out is not repeated: squashd got it and is still at work. Every request
 * is idempotent by job id, so repeating one whose answer was lost is safe.
 * *attempts (may be NULL) tells how many calls were made. */
int squash_client_call_retry(const struct squash_client_options *opts,
			     const Squash__Request *req, Squash__Response **resp,
			     int *attempts, char *err, size_t errlen);

/* Packs req into a SignedRequest frame payload, signing it when use_munge.
 * Returns a malloc'd buffer and its length, or NULL with err. Exposed for
 * tests that replay or corrupt requests. */
unsigned char *squash_client_pack_request(const struct squash_client_options *opts,
					  const Squash__Request *req,
					  size_t *len, char *err, size_t errlen);

const char *squash_status_name(Squash__Status status);
const char *squash_mode_name(Squash__MountMode mode);

#endif

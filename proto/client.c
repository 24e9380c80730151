#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <munge.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "errmsg.h"
#include "frame.h"
#include "clock.h"
#include "sha256.h"

#define DEFAULT_TIMEOUT_MS 30000
/* squash_client_call: a request squashd closed unread is sent again, at
 * most this many times in all, after 50, 100, 200 and 400 ms. */
#define UNREAD_ATTEMPTS 5
#define UNREAD_FIRST_PAUSE_MS 50L

/* Signs the encoded request: the credential's payload is the SHA-256 of
 * those bytes, so squashd can tie the sender's uid to this request and the
 * credential's size does not grow with the request. Returns a credential
 * for free(), or NULL with err. */
static char *munge_sign(const struct squash_client_options *opts,
			const uint8_t *request, size_t len, bool *no_munged,
			char *err, size_t errlen)
{
	munge_ctx_t ctx = munge_ctx_create();
	uint8_t digest[SQUASH_SHA256_SIZE];
	char *cred = NULL, *socket = NULL;
	munge_err_t rc;

	squash_sha256(request, len, digest);
	*no_munged = false;

	if (!ctx) {
		squash_errf(err, errlen,
			    "cannot create MUNGE credential: out of memory");
		return NULL;
	}
	rc = EMUNGE_SUCCESS;
	if (opts->munge_socket)
		rc = munge_ctx_set(ctx, MUNGE_OPT_SOCKET, opts->munge_socket);
	/* No socket file at all: this host runs no munged (auth/slurm). A
	 * socket that refuses is a munged restarting: an error, retried. */
	if (rc == EMUNGE_SUCCESS && opts->munge_if_present &&
	    munge_ctx_get(ctx, MUNGE_OPT_SOCKET, &socket) == EMUNGE_SUCCESS && socket &&
	    access(socket, F_OK) != 0 && errno == ENOENT) {
		*no_munged = true;
		munge_ctx_destroy(ctx);
		return NULL;
	}
	if (rc == EMUNGE_SUCCESS)
		rc = munge_encode(&cred, ctx, digest, (int)sizeof(digest));
	if (rc != EMUNGE_SUCCESS) {
		const char *why = munge_ctx_strerror(ctx);

		squash_errf(err, errlen,
			    "cannot create MUNGE credential: %s (is munged running?)",
			    why ? why : munge_strerror(rc));
		free(cred);
		cred = NULL;
	}
	munge_ctx_destroy(ctx);
	return cred;
}

unsigned char *squash_client_pack_request(const struct squash_client_options *opts,
					  const Squash__Request *req,
					  size_t *len, char *err, size_t errlen)
{
	const size_t limit = SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE;
	Squash__SignedRequest sr = SQUASH__SIGNED_REQUEST__INIT;
	size_t request_len = squash__request__get_packed_size(req);
	uint8_t *request = NULL;
	unsigned char *out = NULL;
	char *cred = NULL;
	size_t out_len;

	*len = 0;
	if (request_len > limit) {
		squash_errf(err, errlen, "request too large (%zu bytes, at most %zu)",
			    request_len, limit);
		return NULL;
	}
	request = malloc(request_len > 0 ? request_len : 1);
	if (!request)
		goto oom;
	squash__request__pack(req, request);
	sr.request.data = request;
	sr.request.len = request_len;
	if (opts && opts->use_munge) {
		bool no_munged;

		cred = munge_sign(opts, request, request_len, &no_munged, err, errlen);
		if (!cred && !no_munged)
			goto out;
		if (cred) {
			sr.has_munge_credential = 1;
			sr.munge_credential.data = (uint8_t *)cred;
			sr.munge_credential.len = strlen(cred);
		}
	}
	out_len = squash__signed_request__get_packed_size(&sr);
	if (out_len > limit) {
		squash_errf(err, errlen,
			    "signed request too large (%zu bytes, at most %zu)",
			    out_len, limit);
		goto out;
	}
	out = malloc(out_len > 0 ? out_len : 1);
	if (!out)
		goto oom;
	squash__signed_request__pack(&sr, out);
	*len = out_len;
	goto out;
oom:
	squash_errf(err, errlen, "out of memory");
out:
	free(request);
	free(cred);
	return out;
}

/* Connects within timeout_ms: for AF_UNIX a blocking connect waits on a
 * full backlog for at most SO_SNDTIMEO, which also bounds the send. */
static int connect_daemon(const char *path, int timeout_ms, char *err,
			  size_t errlen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (timeout_ms % 1000) * 1000 };
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		squash_errf(err, errlen, "squashd socket path is too long: %s",
			    path);
		return -1;
	}
	memcpy(addr.sun_path, path, strlen(path) + 1);
	int sndbuf = SQUASH_FRAME_MAX + 4096;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		squash_errf(err, errlen, "cannot create socket: %s", strerror(errno));
		return -1;
	}
	/* A datagram must fit the send buffer; the default usually does, this
	 * makes sure where wmem_default was lowered (capped by wmem_max). */
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		if (errno == EAGAIN || errno == EINPROGRESS)
			squash_errf(err, errlen,
				    "squashd at %s did not accept the connection within %g s",
				    path, timeout_ms / 1000.0);
		else
			squash_errf(err, errlen,
				    "cannot connect to squashd at %s: %s (is squashd running?)",
				    path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Turns a received response frame into a Response, or explains why not. */
static Squash__Response *parse_response(const uint8_t *buf, size_t len,
					char *err, size_t errlen)
{
	const uint8_t *payload = NULL;
	size_t payload_len = 0;
	uint16_t peer_version = 0;
	Squash__Response *resp;
	int rc;

	rc = squash_frame_parse(buf, len, SQUASH_FRAME_RESPONSE, &payload,
				&payload_len, &peer_version);
	if (rc == SQUASH_FRAME_EVERSION) {
		char advice[768];
		/* Status and message mean the same in every version: squashd
		 * may have said more. */
		if (len > SQUASH_FRAME_HEADER_SIZE)
			resp = squash__response__unpack(NULL, len - SQUASH_FRAME_HEADER_SIZE,
							buf + SQUASH_FRAME_HEADER_SIZE);
		else
			resp = NULL;
		squash_frame_version_advice(advice, sizeof(advice), peer_version, 0);
		if (resp && resp->message && *resp->message)
			squash_errf(err, errlen, "%s; squashd said: %s", advice, resp->message);
		else
			squash_errf(err, errlen, "%s", advice);
		if (resp)
			squash__response__free_unpacked(resp, NULL);
		return NULL;
	}
	if (rc != SQUASH_FRAME_OK) {
		squash_errf(err, errlen, "bad response from squashd: %s",
			    squash_frame_strerror(rc));
		return NULL;
	}
	resp = squash__response__unpack(NULL, payload_len, payload);
	if (!resp)
		squash_errf(err, errlen, "squashd sent a response that cannot be decoded");
	return resp;
}

static void explain_recv_error(int rc, int timeout_ms, char *err, size_t errlen)
{
	switch (rc) {
	case SQUASH_FRAME_ETIMEDOUT:
		squash_errf(err, errlen, "squashd did not answer within %g s",
			    timeout_ms / 1000.0);
		break;
	case SQUASH_FRAME_ECLOSED:
		squash_errf(err, errlen,
			    "squashd closed the connection without answering (see its log)");
		break;
	case SQUASH_FRAME_EIO:
		/* A reset means squashd closed the connection with the
		 * request unread: it was never worked on. */
		if (errno == ECONNRESET)
			squash_errf(err, errlen,
				    "squashd closed the connection without reading the request; its "
				    "log says why (too many connections of this user that sent "
				    "nothing yet?)");
		else
			squash_errf(err, errlen, "cannot read squashd's answer: %s",
				    strerror(errno));
		break;
	default:
		squash_errf(err, errlen, "bad response from squashd: %s",
			    squash_frame_strerror(rc));
		break;
	}
}

/* One attempt. Returns 0, -1 (do not retry) or -2 (squashd could not be
 * reached or dropped the connection: worth another try); *unread (may be
 * NULL) tells squashd closed the connection with the request unread, so
 * it did none of it. */
static int call_attempt(const struct squash_client_options *opts,
		     const Squash__Request *req, Squash__Response **resp,
		     bool *unread, char *err, size_t errlen)
{
	int retryable = 0;
	const char *path = opts && opts->socket_path ? opts->socket_path
						     : SQUASH_DEFAULT_SOCKET;
	int timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms
						      : DEFAULT_TIMEOUT_MS;
	long long deadline = squash_now_ms() + timeout_ms;
	unsigned char *payload;
	uint8_t *buf = NULL;
	size_t payload_len;
	size_t len = 0;
	long long left;
	int fd = -1;
	int rc;

	*resp = NULL;
	if (unread)
		*unread = false;
	/* Sign before connecting: squashd should not wait on munged. */
	payload = squash_client_pack_request(opts, req, &payload_len, err, errlen);
	if (!payload)
		return -2; /* munged restarting, typically */
	fd = connect_daemon(path, timeout_ms, err, errlen);
	if (fd < 0) {
		retryable = 1;
		goto out;
	}
	if (opts && opts->peer_pid) {
		struct ucred cred;
		socklen_t credlen = sizeof cred;

		*opts->peer_pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) == 0 ? cred.pid : 0;
	}
	rc = squash_frame_send(fd, SQUASH_FRAME_REQUEST, payload, payload_len);
	if (rc != SQUASH_FRAME_OK) {
		retryable = !(rc == SQUASH_FRAME_EIO && errno == EAGAIN);
		if (unread)
			*unread = rc == SQUASH_FRAME_EIO && (errno == EPIPE || errno == ECONNRESET);
		if (rc == SQUASH_FRAME_EIO && errno == EAGAIN)
			squash_errf(err, errlen,
				    "squashd did not take the request within %g s",
				    timeout_ms / 1000.0);
		else
			squash_errf(err, errlen, "cannot send request to squashd: %s",
				    rc == SQUASH_FRAME_EIO ? strerror(errno)
						       : squash_frame_strerror(rc));
		goto out;
	}
	buf = malloc(SQUASH_FRAME_MAX);
	if (!buf) {
		squash_errf(err, errlen, "out of memory");
		goto out;
	}
	left = deadline - squash_now_ms();
	rc = squash_frame_recv(fd, buf, &len, left > 0 ? (int)left : 0);
	if (rc != SQUASH_FRAME_OK) {
		if (unread)
			*unread = rc == SQUASH_FRAME_EIO && errno == ECONNRESET;
		explain_recv_error(rc, timeout_ms, err, errlen);
		retryable = rc == SQUASH_FRAME_ECLOSED || rc == SQUASH_FRAME_EIO;
		goto out;
	}
	*resp = parse_response(buf, len, err, errlen);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(payload);
	return *resp ? 0 : retryable ? -2 : -1;
}

int squash_client_call(const struct squash_client_options *opts,
		       const Squash__Request *req, Squash__Response **resp,
		       char *err, size_t errlen)
{
	long pause_ms = UNREAD_FIRST_PAUSE_MS;
	bool unread;

	/* A request squashd closed unread (a burst past a user's connections
	 * that sent nothing yet, server/connections.h) is safe to send again. */
	for (int n = 1;; n++) {
		if (call_attempt(opts, req, resp, &unread, err, errlen) == 0)
			return 0;
		if (!unread || n == UNREAD_ATTEMPTS)
			return -1;
		struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		pause_ms *= 2;
	}
}

int squash_client_call_retry(const struct squash_client_options *opts,
			     const Squash__Request *req, Squash__Response **resp,
			     int *attempts, char *err, size_t errlen)
{
	long long start = squash_now_ms();
	long long give_up = start + (opts && opts->retry_ms > 0 ? opts->retry_ms : 0);
	long pause_ms = 100;
	int n = 0, rc;

	for (;;) {
		n++;
		rc = call_attempt(opts, req, resp, NULL, err, errlen);
		if (rc == 0 && (*resp)->status == SQUASH__STATUS__UNAVAILABLE) {
			squash_errf(err, errlen, "squashd is unavailable: %s",
				    (*resp)->message ? (*resp)->message : "(no reason given)");
			squash__response__free_unpacked(*resp, NULL);
			*resp = NULL;
			rc = -2;
		}
		long long left = give_up - squash_now_ms();
		if (rc != -2 || left <= 0)
			break;
		/* The last pause is cut short, so the whole window is used and
		 * there is one more try at its end. */
		long wait = pause_ms < left ? pause_ms : (long)left;
		struct timespec ts = { wait / 1000, (wait % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		pause_ms = pause_ms * 2 > 2000 ? 2000 : pause_ms * 2;
	}
	if (attempts)
		*attempts = n;
	if (rc != 0 && n > 1) {
		size_t used = strlen(err);
		if (used < errlen)
			snprintf(err + used, errlen - used, " (after %d attempts in %.1f s)", n,
				 (squash_now_ms() - start) / 1000.0);
	}
	return rc == 0 ? 0 : -1;
}

const char *squash_status_name(Squash__Status status)
{
	switch (status) {
	case SQUASH__STATUS__OK:
		return "ok";
	case SQUASH__STATUS__USER_ERROR:
		return "user-error";
	case SQUASH__STATUS__NODE_ERROR:
		return "node-error";
	case SQUASH__STATUS__DENIED:
		return "denied";
	case SQUASH__STATUS__BAD_REQUEST:
		return "bad-request";
	case SQUASH__STATUS__VERSION_MISMATCH:
		return "version-mismatch";
	case SQUASH__STATUS__NOT_FOUND:
		return "not-found";
	case SQUASH__STATUS__UNAVAILABLE:
		return "unavailable";
	default:
		return "unknown";
	}
}

const char *squash_mode_name(Squash__MountMode mode)
{
	switch (mode) {
	case SQUASH__MOUNT_MODE__FUSE:
		return "fuse";
	case SQUASH__MOUNT_MODE__KERNEL:
		return "kernel";
	case SQUASH__MOUNT_MODE__MODE_UNKNOWN: /* squashd's merged mounts (several images at one target) */
		return "merged";
	default:
		return "unknown";
	}
}

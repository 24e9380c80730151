/* Requests to a user's reader and its answers (reader_requests.h). */
#include "config.h"
#include "mount/reader_requests.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"

int reader_send_request(int sock, uint32_t id, uint32_t flags, const int *fds, size_t n)
{
	struct serve_request req = { .magic = SERVE_WIRE_MAGIC, .id = id, .flags = flags };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = &req, .iov_len = sizeof(req) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	ssize_t k;

	if (n == 0 || n > 2)
		return -1;
	memset(&control, 0, sizeof(control));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	/* Never blocks: a reader that stopped reading is not waited for. */
	do
		k = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	return k == (ssize_t)sizeof(req) ? 0 : -1;
}

/* How long a reader may stay silent before squashd kills it. */
#define SILENT_READER_MS 1000

int reader_send_union(int sock, uint32_t id, bool resume, const int *image_fds, size_t n,
		      int fuse_fd, long long deadline_ms)
{
	union {
		char buf[CMSG_SPACE((SERVE_UNION_PART + 1) * sizeof(int))];
		struct cmsghdr align;
	} control;
	int fds[SERVE_UNION_PART + 1];

	if (n == 0 || n > SERVE_UNION_MAX) {
		errno = EINVAL;
		return -1;
	}
	for (size_t first = 0; first < n; first += SERVE_UNION_PART) {
		size_t take = n - first < SERVE_UNION_PART ? n - first : SERVE_UNION_PART;
		size_t nfds = take + (first + take == n);
		struct serve_union_part part = { .magic = SERVE_WIRE_MAGIC, .id = id,
						 .flags = SERVE_UNION | (resume ? SERVE_RESUME : 0),
						 .images = (uint32_t)n, .first = (uint32_t)first };
		struct iovec iov = { .iov_base = &part, .iov_len = sizeof(part) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
				      .msg_controllen = CMSG_SPACE(nfds * sizeof(int)) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		ssize_t k;

		memcpy(fds, image_fds + first, take * sizeof(int));
		if (nfds > take)
			fds[take] = fuse_fd;
		memset(&control, 0, sizeof(control));
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
		for (;;) {
			struct pollfd pfd = { .fd = sock, .events = POLLOUT };
			long long left;

			k = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k >= 0)
				break;
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -1;
			left = deadline_ms - squash_now_ms();
			if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
		}
		if (k != (ssize_t)sizeof(part))
			return -1;
	}
	return 0;
}

enum result reader_await_reply(int sock, int pidfd, pid_t pid, uint32_t id, long long deadline_ms, char *err,
				size_t errlen, bool *timed_out)
{
	struct serve_reply r;
	long long asked_ms = squash_now_ms();

	for (;;) {
		struct pollfd fds[2] = { { .fd = sock, .events = POLLIN },
					 { .fd = pidfd, .events = POLLIN } };
		long long left = deadline_ms - squash_now_ms();
		int n = left > 0 ? poll(fds, 2, (int)left) : 0;
		ssize_t k;

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			/* Silent for a while, not just asked when the request's
			 * time was already up: only then is it to be killed. */
			*timed_out = squash_now_ms() - asked_ms >= SILENT_READER_MS;
			snprintf(err, errlen, "squash-reader pid %d did not answer in time", (int)pid);
			return RESULT_NODE_ERROR;
		}
		if (n < 0 || !(fds[0].revents & POLLIN)) {
			snprintf(err, errlen, "squash-reader pid %d is gone", (int)pid);
			return RESULT_NODE_ERROR;
		}
		k = recv(sock, &r, sizeof(r), MSG_DONTWAIT | MSG_TRUNC);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0) {
			snprintf(err, errlen, "squash-reader pid %d is gone", (int)pid);
			return RESULT_NODE_ERROR;
		}
		if (k != (ssize_t)sizeof(r) || r.magic != SERVE_WIRE_MAGIC) {
			snprintf(err, errlen, "squash-reader pid %d sent a malformed answer", (int)pid);
			return RESULT_NODE_ERROR;
		}
		if (r.id != id)
			continue;
		if (r.error == 0)
			return RESULT_OK;
		r.message[sizeof(r.message) - 1] = '\0';
		/* Full (reader_wire.h), or out of threads: the reader's limits,
		 * not the image's fault; a node error retires it, later mounts
		 * get a new one. */
		bool limit = r.error == EMFILE || r.error == EAGAIN;

		if (limit)
			snprintf(err, errlen, "squash-reader pid %d takes no more mounts: %s", (int)pid,
				 r.message[0] ? r.message : "full");
		else
			snprintf(err, errlen, "squash-reader could not read the image: %s",
				 r.message[0] ? r.message : "error");
		for (char *c = err; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		return limit ? RESULT_NODE_ERROR : RESULT_USER_ERROR;
	}
}


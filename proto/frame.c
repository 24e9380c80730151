#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "frame.h"
#include "clock.h"

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static void write_header_version(uint8_t *hdr, uint16_t version, uint16_t kind)
{
	memcpy(hdr, SQUASH_FRAME_MAGIC, 4);
	put_be16(hdr + 4, version);
	put_be16(hdr + 6, kind);
}

static void write_header(uint8_t *hdr, uint16_t kind)
{
	write_header_version(hdr, SQUASH_PROTOCOL_VERSION, kind);
}

long squash_frame_encode(uint8_t *buf, size_t cap, uint16_t kind,
			 const uint8_t *payload, size_t payload_len)
{
	size_t total;

	if (payload_len > SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE)
		return SQUASH_FRAME_ETOOBIG;
	total = SQUASH_FRAME_HEADER_SIZE + payload_len;
	if (total > cap)
		return SQUASH_FRAME_ETOOBIG;
	write_header(buf, kind);
	if (payload_len > 0)
		memcpy(buf + SQUASH_FRAME_HEADER_SIZE, payload, payload_len);
	return (long)total;
}

int squash_frame_parse(const uint8_t *buf, size_t len, uint16_t expect_kind,
		       const uint8_t **payload, size_t *payload_len,
		       uint16_t *peer_version)
{
	uint16_t version;

	if (len > SQUASH_FRAME_MAX)
		return SQUASH_FRAME_ETOOBIG;
	if (len < SQUASH_FRAME_HEADER_SIZE)
		return SQUASH_FRAME_ESHORT;
	if (memcmp(buf, SQUASH_FRAME_MAGIC, 4) != 0)
		return SQUASH_FRAME_EMAGIC;
	/* The version is checked before the kind so that a peer speaking
	 * another protocol is told so, whatever its kinds mean. */
	version = get_be16(buf + 4);
	if (peer_version)
		*peer_version = version;
	if (version != SQUASH_PROTOCOL_VERSION)
		return SQUASH_FRAME_EVERSION;
	if (get_be16(buf + 6) != expect_kind)
		return SQUASH_FRAME_EKIND;
	*payload = buf + SQUASH_FRAME_HEADER_SIZE;
	*payload_len = len - SQUASH_FRAME_HEADER_SIZE;
	return SQUASH_FRAME_OK;
}

int squash_frame_send(int fd, uint16_t kind, const uint8_t *payload,
		      size_t payload_len)
{
	return squash_frame_send_version(fd, SQUASH_PROTOCOL_VERSION, kind, payload, payload_len);
}

int squash_frame_send_version(int fd, uint16_t version, uint16_t kind,
			      const uint8_t *payload, size_t payload_len)
{
	uint8_t hdr[SQUASH_FRAME_HEADER_SIZE];
	struct iovec iov[2];
	struct msghdr msg;
	ssize_t sent;

	if (payload_len > SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE)
		return SQUASH_FRAME_ETOOBIG;
	write_header_version(hdr, version, kind);
	/* Two iovecs still make one SOCK_SEQPACKET record, and spare a
	 * 64 KiB copy. */
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(hdr);
	iov[1].iov_base = (void *)payload;
	iov[1].iov_len = payload_len;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = payload_len > 0 ? 2 : 1;
	do
		sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	if (sent < 0)
		return SQUASH_FRAME_EIO;
	if ((size_t)sent != sizeof(hdr) + payload_len) {
		errno = EMSGSIZE;
		return SQUASH_FRAME_EIO;
	}
	return SQUASH_FRAME_OK;
}

/* Waits until fd is readable or deadline (ms on CLOCK_MONOTONIC, -1: none)
 * passes; the deadline survives EINTR. */
static int wait_readable(int fd, long long deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (;;) {
		int wait = -1;
		int n;

		if (deadline >= 0) {
			long long left = deadline - squash_now_ms();

			wait = left > 0 ? (int)left : 0;
		}
		n = poll(&pfd, 1, wait);
		if (n > 0)
			return SQUASH_FRAME_OK; /* data, hangup or error: recv tells */
		if (n == 0)
			return SQUASH_FRAME_ETIMEDOUT;
		if (errno != EINTR)
			return SQUASH_FRAME_EIO;
	}
}

int squash_frame_recv(int fd, uint8_t *buf, size_t *len, int timeout_ms)
{
	long long deadline = timeout_ms < 0 ? -1 : squash_now_ms() + timeout_ms;
	struct iovec iov = { .iov_base = buf, .iov_len = SQUASH_FRAME_MAX };
	struct msghdr msg;
	ssize_t n;

	*len = 0;
	if (fd < 0) { /* poll() would silently skip it and time out */
		errno = EBADF;
		return SQUASH_FRAME_EIO;
	}
	for (;;) {
		int rc = wait_readable(fd, deadline);

		if (rc != SQUASH_FRAME_OK)
			return rc;
		/* No control buffer: descriptors a hostile peer passes are
		 * closed by the kernel instead of landing in our table.
		 * MSG_TRUNC makes the kernel report the real length of an
		 * oversized datagram. MSG_DONTWAIT: a spurious wakeup must
		 * not turn into a wait without deadline. */
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		n = recvmsg(fd, &msg, MSG_TRUNC | MSG_DONTWAIT);
		if (n >= 0)
			break;
		if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
			return SQUASH_FRAME_EIO;
	}
	if (n == 0)
		return SQUASH_FRAME_ECLOSED;
	if ((msg.msg_flags & MSG_TRUNC) || (size_t)n > SQUASH_FRAME_MAX)
		return SQUASH_FRAME_ETOOBIG;
	*len = (size_t)n;
	return SQUASH_FRAME_OK;
}

void squash_frame_version_advice(char *buf, size_t len, unsigned peer, int self_is_squashd)
{
	const unsigned self = SQUASH_PROTOCOL_VERSION;
	/* Which side is behind decides what to upgrade; the order is the
	 * same either way. */
	bool squashd_older = self_is_squashd ? peer > self : peer < self;
	const char *fix = squashd_older
		? "squashd on this node is older: upgrade slurm-squash on the compute node (squashd) first"
		: "the plugin or squashctl is older: upgrade slurm-squash where it runs";

	if (self_is_squashd)
		snprintf(buf, len, "the client speaks protocol version %u, squashd (slurm-squash %s) speaks "
			 "version %u: %s (upgrade order: squashd on the compute nodes first, then the plugin "
			 "on submit hosts; docs/admin.md, \"Upgrading slurm-squash itself\")",
			 peer, PACKAGE_VERSION, self, fix);
	else
		snprintf(buf, len, "squashd speaks protocol version %u, this client (slurm-squash %s) speaks "
			 "version %u: %s (upgrade order: squashd on the compute nodes first, then the plugin "
			 "on submit hosts; docs/admin.md, \"Upgrading slurm-squash itself\")",
			 peer, PACKAGE_VERSION, self, fix);
}

const char *squash_frame_strerror(int err)
{
	switch (err) {
	case SQUASH_FRAME_OK:
		return "success";
	case SQUASH_FRAME_ESHORT:
		return "message shorter than the frame header";
	case SQUASH_FRAME_EMAGIC:
		return "not a squashd message (bad magic)";
	case SQUASH_FRAME_EVERSION:
		return "other protocol version";
	case SQUASH_FRAME_EKIND:
		return "unexpected message kind";
	case SQUASH_FRAME_ETOOBIG:
		return "message larger than 64 KiB";
	case SQUASH_FRAME_EIO:
		return "socket error";
	case SQUASH_FRAME_ETIMEDOUT:
		return "timed out";
	case SQUASH_FRAME_ECLOSED:
		return "connection closed by peer";
	default:
		return "unknown frame error";
	}
}

/* Framing over a real SOCK_SEQPACKET socketpair: round trips, hostile
 * datagrams (oversized, wrong magic, other version, short), timeouts and
 * a closed peer. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "unit.h"

static uint8_t *rbuf; /* exactly SQUASH_FRAME_MAX: ASan sees any overrun */

static void make_pair(int sv[2])
{
	CHECK_INT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void test_encode_parse(void)
{
	uint8_t buf[64];
	const uint8_t *payload;
	size_t payload_len;
	uint16_t version = 0;
	long n;

	n = squash_frame_encode(buf, sizeof(buf), SQUASH_FRAME_REQUEST,
				(const uint8_t *)"hello", 5);
	CHECK_INT(n, 13);
	CHECK(memcmp(buf, "SQSH\0\2\0\1hello", 13) == 0);
	CHECK_INT(squash_frame_parse(buf, 13, SQUASH_FRAME_REQUEST, &payload,
				     &payload_len, &version), SQUASH_FRAME_OK);
	CHECK_INT(payload_len, 5);
	CHECK(payload == buf + 8);
	CHECK_INT(version, SQUASH_PROTOCOL_VERSION);

	CHECK_INT(squash_frame_parse(buf, 13, SQUASH_FRAME_RESPONSE, &payload,
				     &payload_len, NULL), SQUASH_FRAME_EKIND);
	CHECK_INT(squash_frame_parse(buf, 7, SQUASH_FRAME_REQUEST, &payload,
				     &payload_len, NULL), SQUASH_FRAME_ESHORT);
	CHECK_INT(squash_frame_parse(buf, SQUASH_FRAME_MAX + 1, SQUASH_FRAME_REQUEST,
				     &payload, &payload_len, NULL), SQUASH_FRAME_ETOOBIG);

	/* Empty payload: a header alone is a valid frame. */
	CHECK_INT(squash_frame_encode(buf, 8, SQUASH_FRAME_RESPONSE, NULL, 0), 8);
	CHECK_INT(squash_frame_parse(buf, 8, SQUASH_FRAME_RESPONSE, &payload,
				     &payload_len, NULL), SQUASH_FRAME_OK);
	CHECK_INT(payload_len, 0);

	/* Capacity and the protocol limit. */
	CHECK_INT(squash_frame_encode(buf, sizeof(buf), SQUASH_FRAME_REQUEST, buf,
				      sizeof(buf) - 7), SQUASH_FRAME_ETOOBIG);
	CHECK_INT(squash_frame_encode(rbuf, SQUASH_FRAME_MAX + 100,
				      SQUASH_FRAME_REQUEST, rbuf,
				      SQUASH_FRAME_MAX - 7), SQUASH_FRAME_ETOOBIG);
}

static void test_round_trip(void)
{
	uint8_t *big = malloc(SQUASH_FRAME_MAX);
	const uint8_t *payload;
	size_t payload_len, len;
	int sv[2];

	make_pair(sv);
	CHECK_INT(squash_frame_send(sv[0], SQUASH_FRAME_REQUEST,
				    (const uint8_t *)"abc", 3), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(len, 11);
	CHECK_INT(squash_frame_parse(rbuf, len, SQUASH_FRAME_REQUEST, &payload,
				     &payload_len, NULL), SQUASH_FRAME_OK);
	CHECK(payload_len == 3 && memcmp(payload, "abc", 3) == 0);

	/* The largest frame there is. */
	memset(big, 0xA5, SQUASH_FRAME_MAX);
	CHECK_INT(squash_frame_send(sv[0], SQUASH_FRAME_RESPONSE, big,
				    SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE),
		  SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(len, SQUASH_FRAME_MAX);
	CHECK_INT(squash_frame_send(sv[0], SQUASH_FRAME_RESPONSE, big,
				    SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE + 1),
		  SQUASH_FRAME_ETOOBIG);
	close(sv[0]);
	close(sv[1]);
	free(big);
}

static void test_oversized_datagram(void)
{
	size_t size = SQUASH_FRAME_MAX + 4096;
	uint8_t *big = calloc(1, size);
	size_t len = 123;
	int sndbuf = 1 << 20;
	int sv[2];

	make_pair(sv);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	memcpy(big, "SQSH\0\1\0\1", 8);
	CHECK_INT(send(sv[0], big, size, 0), (long long)size);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_ETOOBIG);
	CHECK_INT(len, 0);
	/* The datagram is consumed: the next one arrives intact. */
	CHECK_INT(squash_frame_send(sv[0], SQUASH_FRAME_REQUEST, NULL, 0), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(len, 8);
	close(sv[0]);
	close(sv[1]);
	free(big);
}

static void test_hostile_headers(void)
{
	const uint8_t *payload;
	size_t payload_len, len;
	uint16_t version = 0;
	int sv[2];

	make_pair(sv);
	CHECK_INT(send(sv[0], "HTTP/1.1 200", 12, 0), 12);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_parse(rbuf, len, SQUASH_FRAME_REQUEST, &payload,
				     &payload_len, &version), SQUASH_FRAME_EMAGIC);

	CHECK_INT(send(sv[0], "SQSH\0\1\0\1xyz", 11, 0), 11);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_parse(rbuf, len, SQUASH_FRAME_REQUEST, &payload,
				     &payload_len, &version), SQUASH_FRAME_EVERSION);
	CHECK_INT(version, 1);

	/* The version is reported even when the kind is foreign too. */
	CHECK_INT(send(sv[0], "SQSH\x01\x00\x00\x09", 8, 0), 8);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_parse(rbuf, len, SQUASH_FRAME_REQUEST, &payload,
				     &payload_len, &version), SQUASH_FRAME_EVERSION);
	CHECK_INT(version, 256);

	CHECK_INT(send(sv[0], "SQS", 3, 0), 3);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_parse(rbuf, len, SQUASH_FRAME_REQUEST, &payload,
				     &payload_len, &version), SQUASH_FRAME_ESHORT);
	close(sv[0]);
	close(sv[1]);
}

static long elapsed_ms(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start->tv_sec) * 1000 +
	       (now.tv_nsec - start->tv_nsec) / 1000000;
}

static void test_timeout_and_close(void)
{
	struct timespec start;
	size_t len;
	int sv[2];

	make_pair(sv);
	clock_gettime(CLOCK_MONOTONIC, &start);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 200), SQUASH_FRAME_ETIMEDOUT);
	CHECK(elapsed_ms(&start) >= 190);
	CHECK(elapsed_ms(&start) < 2000);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 0), SQUASH_FRAME_ETIMEDOUT);

	close(sv[0]);
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_ECLOSED);
	/* Sending to a closed peer fails without SIGPIPE killing us. */
	CHECK_INT(squash_frame_send(sv[1], SQUASH_FRAME_RESPONSE, NULL, 0),
		  SQUASH_FRAME_EIO);
	CHECK_INT(errno, EPIPE);
	close(sv[1]);

	CHECK_INT(squash_frame_recv(-1, rbuf, &len, 10), SQUASH_FRAME_EIO);
	CHECK_INT(squash_frame_send(-1, SQUASH_FRAME_REQUEST, NULL, 0), SQUASH_FRAME_EIO);
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A hostile peer passing descriptors must not grow our fd table. */
static void test_passed_descriptors_dropped(void)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} control;
	struct msghdr msg = { 0 };
	struct iovec iov;
	struct cmsghdr *cmsg;
	uint8_t hdr[8] = { 'S', 'Q', 'S', 'H', 0, 1, 0, 1 };
	int fds[4], sv[2], before, i;
	size_t len;

	make_pair(sv);
	for (i = 0; i < 4; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	iov.iov_base = hdr;
	iov.iov_len = sizeof(hdr);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = control.buf;
	msg.msg_controllen = sizeof(control.buf);
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
	CHECK_INT(sendmsg(sv[0], &msg, 0), 8);
	for (i = 0; i < 4; i++)
		close(fds[i]);
	before = count_open_fds();
	CHECK_INT(squash_frame_recv(sv[1], rbuf, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(len, 8);
	CHECK_INT(count_open_fds(), before);
	close(sv[0]);
	close(sv[1]);
}

static void test_strerror(void)
{
	CHECK_STR(squash_frame_strerror(SQUASH_FRAME_ETOOBIG), "message larger than 64 KiB");
	CHECK_STR(squash_frame_strerror(SQUASH_FRAME_EMAGIC), "not a squashd message (bad magic)");
	CHECK_STR(squash_frame_strerror(-99), "unknown frame error");
}

int main(void)
{
	rbuf = malloc(SQUASH_FRAME_MAX);
	test_encode_parse();
	test_round_trip();
	test_oversized_datagram();
	test_hostile_headers();
	test_timeout_and_close();
	test_passed_descriptors_dropped();
	test_strerror();
	free(rbuf);
	return unit_exit_code();
}

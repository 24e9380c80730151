/* Descriptors sent to a socket squashd reads are refused by the kernel
 * (proto/passed_fds.c): the sender's sendmsg fails with EPERM, on a
 * socket pair (squashd's end of a reader's socket) and on a listening
 * socket's connections, before they are accepted too (squashd's
 * socket). On a kernel before 6.16 the option does not exist: skipped. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "passed_fds.h"
#include "unit.h"

/* sendmsg of one byte and fd over sock: 0, or the errno. */
static int send_fd(int sock, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	char byte = 'x';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	memset(u.buf, 0, sizeof(u.buf));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_DONTWAIT) == 1 ? 0 : errno;
}

static void test_socket_pair(void)
{
	int sv[2];
	char byte;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
		CHECK(!"socketpair");
		return;
	}
	CHECK_INT(squash_refuse_passed_fds(sv[0]), 0);
	CHECK_INT(send_fd(sv[1], STDIN_FILENO), EPERM);
	/* Plain data still goes. */
	CHECK_INT(write(sv[1], "y", 1), 1);
	CHECK_INT(read(sv[0], &byte, 1), 1);
	CHECK_INT(byte, 'y');
	/* The other direction is not refused. */
	CHECK_INT(send_fd(sv[0], STDIN_FILENO), 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_listener(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	socklen_t len = sizeof(sa_family_t);
	int l = socket(AF_UNIX, SOCK_SEQPACKET, 0), c = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	/* An abstract address the kernel picks (autobind). */
	CHECK(l >= 0 && c >= 0);
	CHECK_INT(bind(l, (struct sockaddr *)&addr, len), 0);
	CHECK_INT(squash_refuse_passed_fds(l), 0);
	CHECK_INT(listen(l, 4), 0);
	len = sizeof(addr);
	CHECK_INT(getsockname(l, (struct sockaddr *)&addr, &len), 0);
	CHECK_INT(connect(c, (struct sockaddr *)&addr, len), 0);
	/* Not accepted yet: refused already. */
	CHECK_INT(send_fd(c, STDIN_FILENO), EPERM);
	close(c);
	close(l);
}

int main(void)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
		CHECK(!"socketpair");
		return unit_exit_code();
	}
	if (squash_refuse_passed_fds(sv[0]) < 0) {
		CHECK_INT(errno, ENOPROTOOPT);
		UNIT_SKIP("this kernel cannot refuse passed descriptors (SO_PASSRIGHTS: Linux 6.16)");
	} else {
		test_socket_pair();
		test_listener();
	}
	close(sv[0]);
	close(sv[1]);
	return unit_exit_code();
}

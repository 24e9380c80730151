#include "config.h"

#include "process/spawner.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "util/log.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* A request: this header, then the op's payload. */
struct spawner_header {
	uint32_t op;
};

/* squashd's end; -1 when there is no spawner. */
static atomic_int spawner_fd = -1;
static int spawner_pidfd = -1;

static void close_above(int keep)
{
	if (keep > 3)
		syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0U);
	syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U);
}

#define MAX_FDS 4 /* the answer socket and up to three for the child */

/* Room for a control message of up to MAX_FDS descriptors. */
union rights {
	char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
	struct cmsghdr align;
};

/* Puts fds[n] (1 to MAX_FDS) into msg as its SCM_RIGHTS, held in u. */
static void put_rights(struct msghdr *msg, union rights *u, const int *fds, size_t n)
{
	memset(u, 0, sizeof(*u));
	msg->msg_control = u->buf;
	msg->msg_controllen = CMSG_SPACE(sizeof(int) * n);
	struct cmsghdr *c = CMSG_FIRSTHDR(msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

/* The descriptors msg carried: at most max into fds, the others closed
 * (none is kept by mistake). Returns how many. */
static size_t take_rights(struct msghdr *msg, int *fds, size_t max)
{
	size_t n = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = got;
			else
				close(got);
		}
	}
	return n;
}

/* A child with its pidfd taken as it is made: with SIGCHLD ignored an
 * exited child is reaped at once, and pidfd_open() after fork() could
 * then name a recycled pid. CLONE_PARENT makes it squashd's child. */
static pid_t clone_with_pidfd(bool squashd_child, int *pidfd)
{
	struct clone_args args;
	pid_t pid;

	memset(&args, 0, sizeof(args));
	args.flags = CLONE_PIDFD | (squashd_child ? CLONE_PARENT : 0);
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	/* With CLONE_PARENT the kernel takes the spawner's own exit signal
	 * (SIGCHLD: squashd forked it), and refuses any other here. */
	args.exit_signal = squashd_child ? 0 : SIGCHLD;
	pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (pid >= 0 || (errno != ENOSYS && errno != EPERM))
		return pid;
	/* systemd's RestrictNamespaces= (squashd.service) refuses clone3:
	 * seccomp cannot read the flags behind its pointer. The old clone()
	 * takes the same flags and CLONE_PIDFD (Linux 5.2), the pidfd going
	 * to its parent_tid argument, the third on every architecture but
	 * s390's. With no stack given the child runs on a copy of ours, as
	 * after fork(). */
#if defined(__s390__) || defined(__CRIS__)
	return (pid_t)syscall(SYS_clone, NULL, (unsigned long)args.flags, pidfd, NULL, NULL);
#else
	return (pid_t)syscall(SYS_clone, (unsigned long)args.flags | (unsigned long)args.exit_signal,
			      NULL, pidfd, NULL, NULL);
#endif
}

/* Tells the answer socket why no child was made (best effort). */
static void send_failure(int sock, int err)
{
	struct spawner_pidfd_msg m = { .magic = SPAWNER_FAILED_MAGIC, .pid = err };

	(void)send(sock, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Sends the child's pidfd to the socket it answers on (best effort: the
 * caller then only cannot kill it early). */
static void send_pidfd(int sock, pid_t pid, int pidfd)
{
	struct spawner_pidfd_msg m = { .magic = SPAWNER_PIDFD_MAGIC, .pid = pid };
	struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	union rights u;

	if (pidfd < 0)
		return;
	put_rights(&msg, &u, &pidfd, 1);
	(void)sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The spawner's loop: one datagram, one child. Only squashd holds the
 * other end, but every request is still checked before anything runs.
 * Never returns; exits when squashd's end closes. */
static void __attribute__((noreturn))
serve(int sock, const struct spawner_op *ops, size_t n_ops)
{
	size_t max = 0;

	for (size_t i = 0; i < n_ops; i++)
		if (ops[i].payload_size > max)
			max = ops[i].payload_size;
	uint8_t *buf = malloc(sizeof(struct spawner_header) + max);
	if (!buf)
		_exit(1);
	for (;;) {
		union rights u;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(struct spawner_header) + max };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
		struct spawner_header h;
		int fds[MAX_FDS], nfds, pidfd = -1;
		ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);

		if (n == 0)
			_exit(0); /* squashd is gone */
		if (n < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		nfds = (int)take_rights(&msg, fds, MAX_FDS);
		memcpy(&h, buf, sizeof(h));
		if (nfds < 1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || h.op >= n_ops ||
		    (size_t)nfds > 1 + ops[h.op].max_fds ||
		    (size_t)n != sizeof(h) + ops[h.op].payload_size) {
			log_warning("spawner: malformed request ignored");
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		pid_t pid = clone_with_pidfd(ops[h.op].squashd_child, &pidfd);
		if (pid == 0) {
			close(sock);
			ops[h.op].run(fds[0], buf + sizeof(h), fds + 1, (size_t)nfds - 1);
			_exit(127);
		}
		if (pid > 0) {
			send_pidfd(fds[0], pid, pidfd);
			close(pidfd);
		} else {
			/* Failed: the reason, then EOF when the socket closes. */
			int err = errno;

			log_error("spawner: cannot make a process for squashd: clone: %s", strerror(err));
			send_failure(fds[0], err);
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	}
}

int spawner_start(const struct spawner_op *ops, size_t n_ops)
{
	int sv[2];
	pid_t parent = getpid();

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_warning("cannot start the spawner (socketpair: %s); squashd forks its children itself",
			    strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		log_warning("cannot start the spawner (fork: %s); squashd forks its children itself",
			    strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		/* It goes with squashd, and holds nothing of squashd's. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		prctl(PR_SET_NAME, "squashd-spawner");
		close(sv[0]);
		close_above(sv[1]);
		log_after_fork();
		/* The kernel reaps its children: squashd waits on pidfds. */
		signal(SIGCHLD, SIG_IGN);
		serve(sv[1], ops, n_ops);
	}
	close(sv[1]);
	/* Not yet waited for, so the pid cannot have been reused. */
	spawner_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	/* A spawner that stops reading must not hold a request for ever. */
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	atomic_store(&spawner_fd, sv[0]);
	log_debug("spawner pid %d forks squashd's per-request children", (int)pid);
	return 0;
}

#define CHILD_FDS_MAGIC 0x53504346u /* "SPCF" */

int spawner_send_child_fds(int sock, const int *fds, size_t n)
{
	uint32_t magic = CHILD_FDS_MAGIC;
	struct iovec iov = { .iov_base = &magic, .iov_len = sizeof(magic) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	union rights u;
	ssize_t k;

	if (n < 1 || n > MAX_FDS)
		return -1;
	put_rights(&msg, &u, fds, n);
	do
		k = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	return k == (ssize_t)sizeof(magic) ? 0 : -1;
}

int spawner_child_fds(int sock, int *fds, size_t max)
{
	uint32_t magic = 0;
	struct iovec iov = { .iov_base = &magic, .iov_len = sizeof(magic) };
	union rights u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	ssize_t k;

	do
		k = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (k < 0 && errno == EINTR);
	if (k != (ssize_t)sizeof(magic) || magic != CHILD_FDS_MAGIC || (msg.msg_flags & MSG_CTRUNC))
		return -1;
	return (int)take_rights(&msg, fds, max);
}

int spawner_request(uint32_t op, const void *payload, size_t len, int answer_fd)
{
	return spawner_request_fds(op, payload, len, &answer_fd, 1);
}

int spawner_request_fds(uint32_t op, const void *payload, size_t len, const int *fds, size_t nfds)
{
	int sock = atomic_load(&spawner_fd);
	struct spawner_header h = { .op = op };
	struct iovec iov[2] = { { .iov_base = &h, .iov_len = sizeof(h) },
				{ .iov_base = (void *)payload, .iov_len = len } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	union rights u;
	ssize_t n;

	if (sock < 0 || nfds < 1 || nfds > MAX_FDS)
		return -1;
	put_rights(&msg, &u, fds, nfds);
	do {
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n == (ssize_t)(sizeof(h) + len))
		return 0;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -1; /* busy beyond SO_SNDTIMEO: this one request forks itself */
	/* Gone: from now on squashd forks itself. The descriptor stays open
	 * (other threads may be sending on it right now; a closed number
	 * could be reused for another file). */
	if (atomic_compare_exchange_strong(&spawner_fd, &sock, -1))
		log_warning("the spawner is gone (%s); squashd forks its children itself from now on",
			    n < 0 ? strerror(errno) : "short write");
	return -1;
}

void spawner_stop(void)
{
	int sock = atomic_load(&spawner_fd);

	/* shutdown, not close: a late request thread may still send on it
	 * (it then forks itself), and the number must not be reused. */
	if (sock >= 0)
		shutdown(sock, SHUT_RDWR);
	if (spawner_pidfd < 0)
		return;
	/* It exits at EOF; wait a little, so that systemd does not find it
	 * left in the unit when squashd stops. */
	struct pollfd p = { .fd = spawner_pidfd, .events = POLLIN };
	if (poll(&p, 1, 2000) == 1)
		(void)waitid(P_PIDFD, (id_t)spawner_pidfd, NULL, WEXITED | WNOHANG);
	close(spawner_pidfd);
	spawner_pidfd = -1;
}

pid_t spawner_receive_pidfd(int sock, int timeout_ms, int *pidfd)
{
	struct spawner_pidfd_msg m;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct pollfd p = { .fd = sock, .events = POLLIN };
	ssize_t n;
	int got = -1;

	*pidfd = -1;
	if (poll(&p, 1, timeout_ms) != 1) {
		errno = ETIMEDOUT;
		return -1;
	}
	n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&got, CMSG_DATA(c), sizeof(int));
	int failed = n > 0 ? spawner_failure_errno(&m, (size_t)n, got >= 0) : 0;
	if (failed) {
		errno = failed; /* the spawner's clone failed: say why */
		return -1;
	}
	if (n != (ssize_t)sizeof(m) || m.magic != SPAWNER_PIDFD_MAGIC || m.pid <= 0 || got < 0 ||
	    (msg.msg_flags & MSG_CTRUNC)) {
		if (got >= 0)
			close(got);
		errno = EAGAIN;
		return -1;
	}
	*pidfd = got;
	return m.pid;
}

#include "config.h"

#include "mount/fuse_probe.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process/child_process.h"
#include "util/close_from.h"

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

#define PROBE_ANSWER_MAGIC 0x50524f42u /* "PROB" */

struct probe_request {
	char mountpoint[PATH_MAX];
};

/* The spawned probe's answer: what it would exit with. */
struct probe_answer {
	uint32_t magic;
	int32_t code;
};

/* 0: the mount answers; 255: something else is mounted there; else errno. */
static int probe_code(const char *mountpoint)
{
	struct statfs sfs;
	struct stat st;

	if (statfs(mountpoint, &sfs) < 0 || stat(mountpoint, &st) < 0)
		return errno > 0 && errno < 255 ? errno : EIO;
	if ((unsigned long)sfs.f_type != FUSE_SUPER_MAGIC)
		return 255;
	return 0;
}

static void __attribute__((noreturn))
spawned_probe(int sock, const void *payload, const int *fds, size_t nfds)
{
	static struct probe_request rq; /* a fresh process: ours alone */
	struct probe_answer a = { .magic = PROBE_ANSWER_MAGIC };

	(void)fds; /* the spawner gives this op none */
	(void)nfds;

	memcpy(&rq, payload, sizeof(rq));
	rq.mountpoint[sizeof(rq.mountpoint) - 1] = '\0';
	a.code = probe_code(rq.mountpoint);
	(void)send(sock, &a, sizeof(a), MSG_NOSIGNAL);
	_exit(0);
}

const struct spawner_op fuse_probe_spawner_op = { sizeof(struct probe_request), spawned_probe, 0, false };

int fuse_probe_start(struct fuse_probe *p, const char *mountpoint)
{
	static struct probe_request none;
	int sv[2];

	p->fd = p->pidfd = -1;
	p->spawned = false;
	if (strlen(mountpoint) < sizeof(none.mountpoint) &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
		struct probe_request *rq = calloc(1, sizeof(*rq));

		if (rq) {
			memcpy(rq->mountpoint, mountpoint, strlen(mountpoint) + 1);
			p->spawned = spawner_request(SPAWNER_FUSE_PROBE, rq, sizeof(*rq), sv[1]) == 0;
			free(rq);
		}
		close(sv[1]);
		if (p->spawned) {
			p->fd = sv[0];
			return 0;
		}
		close(sv[0]);
	}
	int pidfd;
	pid_t pid = child_fork(&pidfd);

	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* As the spawner's children: nothing of squashd's (close_from.h). */
		close_all_but(NULL, 0);
		_exit(probe_code(mountpoint));
	}
	p->fd = p->pidfd = pidfd;
	return 0;
}

int fuse_probe_done(struct fuse_probe *p, int *status)
{
	if (!p->spawned) {
		child_wait(p->pidfd, 0, status);
		close(p->pidfd);
		p->fd = p->pidfd = -1;
		return 1;
	}
	union {
		struct probe_answer a;
		struct spawner_pidfd_msg m;
	} u;
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} c;
	struct iovec iov = { .iov_base = &u, .iov_len = sizeof(u) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = c.buf, .msg_controllen = sizeof(c.buf) };
	ssize_t n;
	int got = -1;

	do {
		n = recvmsg(p->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			if (got < 0)
				got = fd;
			else
				close(fd);
		}
	}
	if (n == (ssize_t)sizeof(u.m) && u.m.magic == SPAWNER_PIDFD_MAGIC && got >= 0 &&
	    p->pidfd < 0) {
		p->pidfd = got;
		return 0;
	}
	if (got >= 0)
		close(got);
	if (n == (ssize_t)sizeof(u.a) && u.a.magic == PROBE_ANSWER_MAGIC && u.a.code >= 0 &&
	    u.a.code <= 255)
		*status = u.a.code << 8; /* as if it had exited with it */
	else
		*status = SIGKILL; /* died without an answer */
	close(p->fd);
	if (p->pidfd >= 0)
		close(p->pidfd); /* it exits by itself; the kernel reaps it */
	p->fd = p->pidfd = -1;
	return 1;
}

void fuse_probe_abandon(struct fuse_probe *p)
{
	if (!p->spawned) {
		child_abandon(p->pidfd);
	} else {
		child_kill(p->pidfd);
		if (p->pidfd >= 0)
			close(p->pidfd);
		close(p->fd);
	}
	p->fd = p->pidfd = -1;
}

#include "config.h"

#include "mount/image_open.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "process/child_process.h"
#include "mount/image_work_left.h"
#include "process/spawner.h"
#include "clock.h"
#include "imagespec.h"
#include "read_full.h"
#include "user_fuse.h"
#include "user_fuse_walk.h"
#include "util/close_detached.h"
#include "util/close_from.h"
#include "util/file_identity.h"
#include "util/log.h"

/* What the child tells the parent; the parent words the error, the child
 * only reports which step failed and why. */
enum open_step {
	STEP_OK = 0,
	STEP_BECOME,	/* dropping to the user failed */
	STEP_OPEN,	/* opening it O_PATH (user_fuse_walk.h) failed */
	STEP_SYMLINK,	/* the path names a symbolic link */
	STEP_NOT_REG,	/* not a regular file; mode says what it is */
	STEP_REOPEN,	/* reopening for reading failed */
	STEP_FSTAT,
	STEP_USER_FUSE,	/* on a user's FUSE server, or cannot be told (user_fuse.h); reason says why */
};

struct open_status {
	int32_t step;
	int32_t err;
	uint32_t mode;
	/* The superblock, read by the child too: a read that hangs on a dead
	 * file server then hangs a process we can give up on, not squashd. */
	int32_t header_err; /* errno of the read, 0 when it worked */
	uint32_t header_len;
	uint8_t header[SQUASH_SUPERBLOCK_SIZE];
	char reason[1024]; /* STEP_USER_FUSE's */
	uint32_t mount_fit; /* the image's mount is plain and fit: kept (fit_mounts) */
};

/* Mounts found fit for images, by unique id (user_fuse_walk.h): given to
 * each opener, so that opening an image on a mount found fit before reads
 * no mountinfo, whose length any user sets. Only the mount of an image
 * an opener returned is added, its id taken from that descriptor here. */
static pthread_mutex_t fit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct squash_fit_mounts fit_mounts;

static void child_send(int sock, const struct open_status *status, int fd)
{
	struct iovec iov = { .iov_base = (void *)status,
			     .iov_len = sizeof(*status) };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	/* Nothing useful to do on failure: the parent sees EOF. */
	(void)sendmsg(sock, &msg, MSG_NOSIGNAL);
}

static void close_range_compat(unsigned first, unsigned last)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, first, last, 0) == 0)
		return;
#endif
	long max = sysconf(_SC_OPEN_MAX);

	if (max < 0 || max > 65536)
		max = 65536;
	for (unsigned fd = first; fd <= last && fd < (unsigned)max; fd++)
		close((int)fd);
}

/* Runs in the forked child, never returns. */
static void __attribute__((noreturn))
child_open(int sock, const char *path, const struct identity *id, struct squash_fit_mounts *fit)
{
	struct open_status status = { .step = STEP_OK };
	struct stat st;
	char proc_path[64];
	int pfd, fd = -1;
	ssize_t got;

	/* The user's process has no business holding squashd's sockets and
	 * mounts' descriptors, even briefly. */
	if (sock > 3)
		close_range_compat(3, (unsigned)sock - 1);
	close_range_compat((unsigned)sock + 1, ~0U);

	if (identity_become(id) < 0) {
		status.step = STEP_BECOME;
		status.err = errno;
		goto out;
	}
	/* Walked one component at a time, each mount judged before a
	 * lookup in it: a user's FUSE server that reads a LOOKUP and never
	 * answers would keep this child for good, unkillable, in squashd's
	 * cgroup (user_fuse_walk.h). */
	bool last_is_link;

	pfd = squash_open_beside_user_fuse(path, true, &last_is_link, fit, status.reason, sizeof(status.reason));
	if (pfd < 0) {
		status.err = errno;
		/* ELOOP also means too many links along the path; only call
		 * it a symbolic link when the last component is one. */
		status.step = status.reason[0] ? STEP_USER_FUSE : last_is_link ? STEP_SYMLINK : STEP_OPEN;
		goto out;
	}
	if (fstat(pfd, &st) < 0) {
		status.step = STEP_FSTAT;
		status.err = errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		status.step = S_ISLNK(st.st_mode) ? STEP_SYMLINK : STEP_NOT_REG;
		status.mode = st.st_mode;
		goto out;
	}
	uint64_t mount = squash_mount_unique_id(pfd);
	status.mount_fit = mount && squash_fit_mounts_has(fit, mount);
	/* A file on a user's FUSE mount is never opened for reading (every
	 * close of it, here, in squashd, in a server, would send a FLUSH only
	 * that user's server answers): the walk judged its mount already. */
	/* Reopening the O_PATH descriptor through /proc checks read
	 * permission for this (the user's) identity on the very inode we
	 * checked, so the path cannot be swapped in between. */
	snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", pfd);
	fd = open(proc_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		status.step = STEP_REOPEN;
		status.err = errno;
		goto out;
	}
	got = squash_read_full(fd, status.header, sizeof(status.header), 0);
	if (got < 0)
		status.header_err = errno;
	else
		status.header_len = (uint32_t)got;
out:
	child_send(sock, &status, fd);
	_exit(0);
}

/* What the spawner's child gets (process/spawner.h). */
struct open_request {
	struct identity id;
	char path[SQUASH_PATH_MAX];
	struct squash_fit_mounts fit;
};

/* In the spawner's child: checks what it was given, then opens. */
static void __attribute__((noreturn))
spawned_open(int sock, const void *payload, const int *fds, size_t nfds)
{
	static struct open_request rq; /* a fresh process: ours alone */

	(void)fds; /* the spawner gives this op none */
	(void)nfds;

	memcpy(&rq, payload, sizeof(rq));
	rq.path[sizeof(rq.path) - 1] = '\0';
	if (rq.id.ngroups < 0 || rq.id.ngroups > IDENTITY_MAX_GROUPS || rq.fit.n > SQUASH_FIT_MOUNTS_MAX)
		_exit(1); /* squashd sees EOF: died without an answer */
	child_open(sock, rq.path, &rq.id, &rq.fit);
}

const struct spawner_op image_open_spawner_op = { sizeof(struct open_request), spawned_open, 0, false };

/* Asks the spawner for the opener; false when it cannot (then we fork). */
static bool spawn_opener(const char *path, const struct identity *id, int answer_fd)
{
	struct open_request *rq = malloc(sizeof(*rq));
	bool sent = false;

	if (rq && strlen(path) < sizeof(rq->path)) {
		memset(rq, 0, sizeof(*rq));
		rq->id = *id;
		memcpy(rq->path, path, strlen(path) + 1);
		pthread_mutex_lock(&fit_lock);
		rq->fit = fit_mounts;
		pthread_mutex_unlock(&fit_lock);
		sent = spawner_request(SPAWNER_OPEN_IMAGE, rq, sizeof(*rq), answer_fd) == 0;
	}
	free(rq);
	return sent;
}

/* Receives one message: the status and, on success, exactly one
 * descriptor (returns 0), or the spawner's pidfd of the child (returns 1,
 * *fd the pidfd). Returns 2 (errno set) when the spawner could not make
 * the child, -1 when the child died or sent something malformed. */
static int receive_status(int sock, uid_t owner, struct open_status *status, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = status, .iov_len = sizeof(*status) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	ssize_t n;
	int nfds = 0;

	*fd = -1;
	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL;
	     c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < cnt; i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (nfds++ == 0)
				*fd = got;
			else
				close_detached(owner, got);
		}
	}
	int failed = spawner_failure_errno(status, (size_t)n, nfds);
	if (failed) {
		errno = failed;
		return 2;
	}
	if (n == (ssize_t)sizeof(struct spawner_pidfd_msg) && nfds == 1 &&
	    !(msg.msg_flags & MSG_CTRUNC) &&
	    ((struct spawner_pidfd_msg *)status)->magic == SPAWNER_PIDFD_MAGIC)
		return 1;
	if (n != (ssize_t)sizeof(*status) || (msg.msg_flags & MSG_CTRUNC) ||
	    nfds > 1 || (status->step == STEP_OK) != (nfds == 1)) {
		if (*fd >= 0)
			close_detached(owner, *fd); /* FLUSH: its server may hang */
		*fd = -1;
		return -1;
	}
	return 0;
}

static const char *file_type_name(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISLNK(mode))
		return "a symbolic link";
	return "not a regular file";
}

static enum result describe_failure(const struct open_status *status,
				    const char *path,
				    const struct identity *id, char *err,
				    size_t errlen)
{
	int e = status->err;

	switch (status->step) {
	case STEP_BECOME:
		snprintf(err, errlen, "image %s: cannot switch to user %s (uid %u): %s",
			 path, id->name, (unsigned)id->uid, strerror(e));
		return RESULT_NODE_ERROR;
	case STEP_SYMLINK:
		snprintf(err, errlen,
			 "image %s is a symbolic link, not a regular file", path);
		return RESULT_USER_ERROR;
	case STEP_NOT_REG:
		snprintf(err, errlen, "image %s is %s, not a regular file",
			 path, file_type_name((mode_t)status->mode));
		return RESULT_USER_ERROR;
	case STEP_USER_FUSE:
		snprintf(err, errlen, "image %s %.*s", path, (int)sizeof(status->reason), status->reason);
		return RESULT_USER_ERROR;
	case STEP_OPEN:
	case STEP_REOPEN:
	case STEP_FSTAT:
		break;
	default:
		snprintf(err, errlen, "image %s: opener sent an unknown answer",
			 path);
		return RESULT_NODE_ERROR;
	}
	switch (e) {
	case EACCES:
	case EPERM:
		snprintf(err, errlen, "image %s: not readable by user %s (uid %u): %s",
			 path, id->name, (unsigned)id->uid, strerror(e));
		return RESULT_USER_ERROR;
	case ENOENT:
	case ENOTDIR:
	case ELOOP:
	case ENAMETOOLONG:
		snprintf(err, errlen, "image %s: %s", path, strerror(e));
		return RESULT_USER_ERROR;
	default:
		snprintf(err, errlen, "image %s: opening as user %s failed: %s",
			 path, id->name, strerror(e));
		return RESULT_NODE_ERROR;
	}
}

/* Done with the opener: ours is killed (when it failed) and reaped by
 * the watcher; the spawner's is reaped by the kernel, so it is only
 * killed when it failed. Either is counted for its user until it exits
 * (image_work_left.h): a kill does not end a request its file system
 * holds, nor does the exit's FLUSH of its copy. */
static void forget_opener(uid_t uid, bool spawned, int pidfd, bool failed)
{
	if (pidfd < 0)
		return;
	if (!spawned) {
		image_work_left_opener(uid, fcntl(pidfd, F_DUPFD_CLOEXEC, 3));
		child_abandon(pidfd);
		return;
	}
	if (failed)
		child_kill(pidfd);
	image_work_left_opener(uid, pidfd);
}

enum result image_open_as_user(const char *path, const struct identity *id,
			       int timeout_ms, int *fd_out, struct stat *st,
			       struct image_header *header, char *err,
			       size_t errlen)
{
	struct open_status status;
	int sv[2], fd = -1, pidfd;
	long long deadline = squash_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	pid_t pid;

	*fd_out = -1;
	char why[512];
	if (image_work_left_refuses(id->uid, why, sizeof(why))) {
		snprintf(err, errlen, "image %s: %s", path, why);
		return RESULT_USER_ERROR;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "image %s: socketpair: %s", path,
			 strerror(errno));
		return RESULT_NODE_ERROR;
	}
	/* The spawner forks it, which costs a fraction of a fork of squashd
	 * and stops none of squashd's threads (process/spawner.h). */
	bool spawned = spawn_opener(path, id, sv[1]);
	pidfd = -1;
	if (!spawned) {
		pid = child_fork(&pidfd);
		if (pid < 0) {
			snprintf(err, errlen, "image %s: fork: %s", path, strerror(errno));
			close(sv[0]);
			close(sv[1]);
			return RESULT_NODE_ERROR;
		}
		if (pid == 0) {
			int keep[1] = { sv[1] };

			/* As the spawner's children: nothing of squashd's (close_from.h). */
			close_all_but(keep, 1);
			static struct squash_fit_mounts fit; /* a fresh process: ours alone */
			fit = fit_mounts;
			child_open(sv[1], path, id, &fit);
		}
	}
	close(sv[1]);

	/* A hung file system (NFS server gone) blocks the child, never us. */
	for (;;) {
		struct pollfd p[2] = { { .fd = sv[0], .events = POLLIN },
				       { .fd = child_stop_fd(), .events = POLLIN } };
		long long left = deadline - squash_now_ms();
		int r, got;

		if (left < 0)
			left = 0;
		r = poll(p, p[1].fd >= 0 ? 2 : 1, (int)left);
		if (r > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			r = receive_status(sv[0], id->uid, &status, &got);
			if (r == 0) {
				fd = got;
				break;
			}
			if (r == 1) { /* the spawner's pidfd of the child */
				if (pidfd < 0)
					pidfd = got;
				else
					close(got);
				continue;
			}
			if (r == 2)
				snprintf(err, errlen,
					 "image %s: squashd could not start the process that opens it as user %s: %s",
					 path, id->name, strerror(errno));
			else
				snprintf(err, errlen,
					 "image %s: the process opening it as user %s died without an answer",
					 path, id->name);
		} else if (r < 0 && errno == EINTR) {
			continue;
		} else if (r < 0) {
			snprintf(err, errlen, "image %s: poll: %s", path,
				 strerror(errno));
		} else if (r > 0) {
			snprintf(err, errlen, "image %s: squashd is stopping", path);
		} else {
			snprintf(err, errlen,
				 "opening image %s as user %s timed out after %.1f s (is its file system hung?)",
				 path, id->name, timeout_ms / 1000.0);
		}
		close(sv[0]);
		forget_opener(id->uid, spawned, pidfd, true);
		return RESULT_NODE_ERROR;
	}
	close(sv[0]);
	/* It exits right after answering. */
	forget_opener(id->uid, spawned, pidfd, false);

	if (status.step != STEP_OK)
		return describe_failure(&status, path, id, err, errlen);

	/* From the inode cache: the image may sit on the user's own FUSE
	 * mount, whose server the user can stop. */
	struct file_identity fid;
	if (file_identity_of(fd, &fid, st) < 0) {
		snprintf(err, errlen, "image %s: statx: %s", path, strerror(errno));
		close_detached(id->uid, fd);
		return RESULT_NODE_ERROR;
	}
	if (!S_ISREG(st->st_mode)) { /* cannot happen; never trust the peer */
		snprintf(err, errlen, "image %s is %s, not a regular file", path,
			 file_type_name(st->st_mode));
		close_detached(id->uid, fd);
		return RESULT_USER_ERROR;
	}
	uint64_t mount = status.mount_fit ? squash_mount_unique_id(fd) : 0;
	if (mount) {
		pthread_mutex_lock(&fit_lock);
		squash_fit_mounts_add(&fit_mounts, mount);
		pthread_mutex_unlock(&fit_lock);
	}
	if (header) {
		header->read_errno = status.header_err;
		header->len = status.header_len <= sizeof(header->bytes) ? status.header_len : 0;
		memcpy(header->bytes, status.header, header->len);
	}
	*fd_out = fd;
	return RESULT_OK;
}

#include "config.h"
#include "mount/overlay_upper.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "process/child_process.h"
#include "clock.h"
#include "user_fuse_walk.h"
#include "util/close_from.h"

enum step {
	STEP_OK,
	STEP_BECOME,    /* switching to the user with CAP_SYS_ADMIN only */
	STEP_OPEN,      /* opening DIR as the user */
	STEP_NOT_DIR,
	STEP_NOT_OWNER, /* DIR, DIR/upper or DIR/work is not the user's */
	STEP_SUBDIR,    /* creating or opening DIR/upper or DIR/work */
	STEP_MOUNT,
	STEP_USER_FUSE, /* DIR is on a user's FUSE mount (user_fuse_walk.h); reason says why */
};

struct upper_status {
	int step;
	int err;
	unsigned owner;      /* STEP_NOT_OWNER: the owner found */
	char which[8];       /* "", "upper" or "work" */
	char reason[512];    /* STEP_USER_FUSE's */
};

/* Becomes the user but keeps CAP_SYS_ADMIN (mounting; overlayfs' trusted.*
 * attributes) and CAP_DAC_OVERRIDE (overlayfs makes its work directory
 * mode 0 and expects its mounter to pass), and nothing else. Never
 * CAP_CHOWN or CAP_FSETID: a copy-up keeps the lower file's owner and
 * mode, so with them a user's image holding a set-uid root file would
 * leave that file, set-uid root, in the user's own directory. Without
 * them such a copy-up fails (the user cannot change files that are not
 * theirs). */
static int become_user_with_sys_admin(const struct identity *id)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	const int keep[] = { CAP_SYS_ADMIN, CAP_DAC_OVERRIDE };

	if (prctl(PR_SET_KEEPCAPS, 1L, 0L, 0L, 0L) < 0 ||
	    setgroups((size_t)id->ngroups, id->groups) < 0 ||
	    setresgid(id->gid, id->gid, id->gid) < 0 || setresuid(id->uid, id->uid, id->uid) < 0)
		return -1;
	memset(data, 0, sizeof(data));
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		data[CAP_TO_INDEX(keep[i])].effective |= CAP_TO_MASK(keep[i]);
		data[CAP_TO_INDEX(keep[i])].permitted |= CAP_TO_MASK(keep[i]);
	}
	if (syscall(SYS_capset, &hdr, data) < 0 || prctl(PR_SET_KEEPCAPS, 0L, 0L, 0L, 0L) < 0)
		return -1;
	/* No way back to root. */
	if (id->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* Becomes the user with every capability set empty (effective,
 * permitted, inheritable; ambient goes with the uid change): the part of
 * the work that touches user paths runs with exactly the user's rights,
 * so no root-only directory on the way to DIR can be passed, and a user's
 * file system is never asked anything as root. */
static int become_user_without_capabilities(const struct identity *id)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	if (identity_become(id) < 0)
		return -1;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) < 0)
		return -1;
	return 0;
}

/* Runs fn in a child that has become the user without capabilities, with
 * no descriptor of squashd's but uses_fd (-1: none); fn
 * fills answer (len bytes) and up to 2 descriptors (-1: none), which come
 * back over a socket pair (SCM_RIGHTS). Waits until deadline_ms. Returns
 * 1 with answer and fds filled, 0 on timeout, -1 when the child died
 * without an answer (or squashd is stopping). */
static int as_user(const struct identity *id, long long deadline_ms,
		   void (*fn)(void *arg, void *answer, int fds[2]), void *arg, int uses_fd,
		   void *answer, size_t len, int fds[2])
{
	int sv[2], pidfd, ready;

	fds[0] = fds[1] = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	pid_t pid = child_fork(&pidfd);
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		int out[2] = { -1, -1 }, n = 0;
		char control[CMSG_SPACE(2 * sizeof(int))] = { 0 };
		struct iovec iov = { .iov_base = answer, .iov_len = len };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

		int keep[2] = { sv[1], uses_fd };

		/* A user's file system may hold this child for good: it keeps
		 * nothing of squashd's but what fn needs (close_from.h). */
		close_all_but(keep, 2);
		if (become_user_without_capabilities(id) < 0)
			_exit(1);
		fn(arg, answer, out);
		for (int i = 0; i < 2; i++)
			if (out[i] >= 0)
				n++;
		if (n) {
			msg.msg_control = control;
			msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
			struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(n * sizeof(int));
			memcpy(CMSG_DATA(c), out, n * sizeof(int));
		}
		_exit(sendmsg(sv[1], &msg, 0) == (ssize_t)len ? 0 : 1);
	}
	close(sv[1]);
	ready = child_wait_readable(sv[0], deadline_ms);
	if (ready == 1) {
		char control[CMSG_SPACE(2 * sizeof(int))];
		struct iovec iov = { .iov_base = answer, .iov_len = len };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
				      .msg_controllen = sizeof(control) };
		ssize_t got = recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC);
		size_t kept = 0;
		ready = got == (ssize_t)len && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? 1 : -1;
		for (struct cmsghdr *c = got >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (kept < 2 && ready == 1)
					fds[kept++] = fd;
				else
					close(fd);
			}
		}
		if (ready != 1)
			for (int i = 0; i < 2; i++)
				if (fds[i] >= 0) {
					close(fds[i]);
					fds[i] = -1;
				}
	}
	close(sv[0]);
	child_abandon(pidfd);
	return ready;
}

/* Opens (creating it when missing) the subdirectory name of dirfd as the
 * user; it must be a directory of the user's. */
static int open_subdir(int dirfd, const char *name, mode_t mode, uid_t uid,
		       struct upper_status *st)
{
	struct stat sb;

	snprintf(st->which, sizeof(st->which), "%s", name);
	if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST) {
		st->step = STEP_SUBDIR;
		st->err = errno;
		return -1;
	}
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) < 0) {
		st->step = STEP_SUBDIR;
		st->err = errno;
		return -1;
	}
	if (sb.st_uid != uid) {
		st->step = STEP_NOT_OWNER;
		st->owner = (unsigned)sb.st_uid;
		close(fd);
		return -1;
	}
	return fd;
}

struct open_args {
	const char *dir;
	uid_t uid;
};

/* As the user without capabilities: DIR and its upper/ and work/,
 * checked to be the user's; the two descriptors go back to squashd. */
static void open_dirs(void *arg, void *answer, int fds[2])
{
	const struct open_args *a = arg;
	struct upper_status *st = answer;
	struct stat sb;
	int dfd;

	*st = (struct upper_status){ .step = STEP_OK };
	/* Walked a component at a time, never asking a user's FUSE server
	 * (whose unanswered LOOKUP would keep this child for good), then
	 * reopened for reading: the very directory walked to. */
	bool last_is_link;
	char self[64];
	int pfd = squash_open_beside_user_fuse(a->dir, false, &last_is_link, NULL, st->reason, sizeof(st->reason));

	if (pfd < 0) {
		st->step = st->reason[0] ? STEP_USER_FUSE : errno == ENOTDIR ? STEP_NOT_DIR : STEP_OPEN;
		st->err = last_is_link ? ELOOP : errno;
		return;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	dfd = open(self, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		st->step = errno == ENOTDIR ? STEP_NOT_DIR : STEP_OPEN;
		st->err = errno;
		return;
	}
	if (fstat(dfd, &sb) < 0) {
		st->step = STEP_OPEN;
		st->err = errno;
		return;
	}
	if (sb.st_uid != a->uid) {
		st->step = STEP_NOT_OWNER;
		st->owner = (unsigned)sb.st_uid;
		return;
	}
	if ((fds[0] = open_subdir(dfd, "upper", 0755, a->uid, st)) < 0 ||
	    (fds[1] = open_subdir(dfd, "work", 0700, a->uid, st)) < 0) {
		fds[0] = fds[1] = -1; /* (the child exits: nothing to close) */
		return;
	}
	st->which[0] = '\0';
}

/* The mount, from descriptors only: the user's two directories opened
 * without capabilities (open_dirs), the lower layer and the mount point
 * opened by root. The only user-facing step with CAP_SYS_ADMIN and
 * CAP_DAC_OVERRIDE, and it resolves no name the user chose. */
static void child_mount(int out, const struct identity *id, int lowerfd, int pointfd, int ufd,
			int wfd)
{
	struct upper_status st = { .step = STEP_OK };
	char opts[256], target[64];

	if (become_user_with_sys_admin(id) < 0) {
		st.step = STEP_BECOME;
		st.err = errno;
		goto out;
	}
	/* Descriptors, not paths: what was checked is what gets mounted. The
	 * upper layer's content is the user's: redirects and metacopy
	 * attributes found there are not followed. */
	snprintf(opts, sizeof(opts),
		 "lowerdir=/proc/self/fd/%d,upperdir=/proc/self/fd/%d,workdir=/proc/self/fd/%d,"
		 "redirect_dir=nofollow,metacopy=off", lowerfd, ufd, wfd);
	snprintf(target, sizeof(target), "/proc/self/fd/%d", pointfd);
	if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0) {
		st.step = STEP_MOUNT;
		st.err = errno;
	}
out:
	if (write(out, &st, sizeof(st)) != (ssize_t)sizeof(st))
		_exit(1);
	_exit(0);
}

struct root_attrs {
	int err;
	uid_t uid;
	gid_t gid;
	mode_t mode;
};

static void stat_lower(void *arg, void *answer, int fds[2])
{
	struct root_attrs *a = answer;
	struct stat st;

	(void)fds;
	*a = (struct root_attrs){ 0 };
	if (fstat(*(const int *)arg, &st) < 0)
		a->err = errno;
	else
		*a = (struct root_attrs){ 0, st.st_uid, st.st_gid, st.st_mode };
}

enum result overlay_lower_root(const char *lower, const struct identity *id, int timeout_ms,
			       uid_t *uid, gid_t *gid, mode_t *mode, bool *timed_out, char *err,
			       size_t errlen)
{
	struct root_attrs a;
	int fds[2];
	/* O_PATH: reaching the mount's root asks its server nothing. */
	int lowerfd = open(lower, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (lowerfd < 0) {
		snprintf(err, errlen, "cannot open the root of %s: %s", lower, strerror(errno));
		return RESULT_NODE_ERROR;
	}
	/* A second at least, as for the overlay mount (core/overlay.c): the
	 * caller kills a reader that stays silent, never one asked too late. */
	int r = as_user(id, squash_now_ms() + (timeout_ms > 1000 ? timeout_ms : 1000), stat_lower,
			&lowerfd, lowerfd, &a, sizeof(a), fds);
	close(lowerfd);
	*timed_out = r == 0;
	if (r != 1 || a.err) {
		snprintf(err, errlen, "cannot read the root of %s as user %s: %s", lower, id->name,
			 r == 0 ? "timed out (is its FUSE server stopped?)"
			 : r < 0 ? "the process asking died without an answer" : strerror(a.err));
		return RESULT_NODE_ERROR;
	}
	*uid = a.uid;
	*gid = a.gid;
	/* Never set-uid or set-gid: a set-gid upper root would give files
	 * the user creates there a group the image named. */
	*mode = a.mode & (S_IRWXU | S_IRWXG | S_IRWXO | S_ISVTX);
	return RESULT_OK;
}

/* A STATFS of the lower layer: unlike its root's attributes, which the
 * kernel may keep, one the kernel always asks the server. */
static void statfs_lower(void *arg, void *answer, int fds[2])
{
	struct statfs sf;

	(void)fds;
	*(int *)answer = fstatfs(*(const int *)arg, &sf) < 0 ? errno : 0;
}

bool overlay_lower_silent(const char *lower, const struct identity *id, int timeout_ms)
{
	int answer, fds[2];
	/* O_PATH: reaching the mount's root asks its server nothing. */
	int lowerfd = open(lower, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (lowerfd < 0)
		return false;
	int r = as_user(id, squash_now_ms() + (timeout_ms > 1000 ? timeout_ms : 1000), statfs_lower,
			&lowerfd, lowerfd, &answer, sizeof(answer), fds);
	close(lowerfd);
	return r == 0;
}

static enum result describe(const struct upper_status *st, const char *dir,
			    const struct identity *id, char *err, size_t errlen)
{
	const char *e = strerror(st->err);

	switch (st->step) {
	case STEP_BECOME:
		snprintf(err, errlen, "upper directory %s: cannot switch to user %s (uid %u): %s",
			 dir, id->name, (unsigned)id->uid, e);
		return RESULT_NODE_ERROR;
	case STEP_OPEN:
		if (st->err == ELOOP)
			snprintf(err, errlen, "upper directory %s is a symbolic link; name the directory itself",
				 dir);
		else
			snprintf(err, errlen, "upper directory %s: cannot open it as user %s: %s",
				 dir, id->name, e);
		return st->err == EIO || st->err == ENOMEM ? RESULT_NODE_ERROR : RESULT_USER_ERROR;
	case STEP_NOT_DIR:
		snprintf(err, errlen, "upper directory %s is not a directory", dir);
		return RESULT_USER_ERROR;
	case STEP_NOT_OWNER:
		snprintf(err, errlen, "upper directory %s%s%s belongs to uid %u, not to %s: "
			 "it must be a directory you own", dir, st->which[0] ? "/" : "",
			 st->which, st->owner, id->name);
		return RESULT_USER_ERROR;
	case STEP_SUBDIR:
		snprintf(err, errlen, "upper directory %s: cannot create or open %s/%s as user %s: %s",
			 dir, dir, st->which, id->name, e);
		return RESULT_USER_ERROR;
	case STEP_USER_FUSE:
		snprintf(err, errlen, "upper directory %s %.*s", dir, (int)sizeof(st->reason), st->reason);
		return RESULT_USER_ERROR;
	case STEP_MOUNT:
		if (st->err == EINVAL || st->err == EOPNOTSUPP)
			snprintf(err, errlen, "upper directory %s: overlayfs cannot keep changes on its file "
				 "system (%s; NFS, for one, is refused): use a directory on a local or "
				 "parallel file system, or :rw without a directory", dir, e);
		else
			snprintf(err, errlen, "upper directory %s: cannot mount the overlay as user %s: %s",
				 dir, id->name, e);
		return st->err == EINVAL || st->err == EOPNOTSUPP || st->err == EACCES ||
		       st->err == EPERM || st->err == EBUSY ? RESULT_USER_ERROR : RESULT_NODE_ERROR;
	default:
		snprintf(err, errlen, "upper directory %s: the mounting process sent an unknown answer", dir);
		return RESULT_NODE_ERROR;
	}
}

enum result overlay_mount_named_upper(const char *dir, const struct identity *id,
				      const char *lower, const char *point, int timeout_ms,
				      bool *mount_timed_out, char *err, size_t errlen)
{
	struct upper_status st;
	struct open_args args = { dir, id->uid };
	long long deadline = squash_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int pipefd[2] = { -1, -1 }, dirs[2] = { -1, -1 }, pidfd;
	/* Opened as root: the user cannot reach squashd's mount directory. */
	int lowerfd = open(lower, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int pointfd = open(point, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	enum result res = RESULT_NODE_ERROR;

	*mount_timed_out = false;
	if (lowerfd < 0 || pointfd < 0) {
		snprintf(err, errlen, "cannot prepare the overlay on %s: %s", point, strerror(errno));
		goto out;
	}
	/* First DIR, as the user and nothing more (open_dirs). */
	int r = as_user(id, deadline, open_dirs, &args, -1, &st, sizeof(st), dirs);
	if (r == 0) {
		snprintf(err, errlen, "upper directory %s: opening it as user %s timed out "
			 "(is its file system hung?)", dir, id->name);
		goto out;
	} else if (r < 0) {
		snprintf(err, errlen, "upper directory %s: the process opening it as user %s "
			 "died without an answer", dir, id->name);
		goto out;
	} else if (st.step != STEP_OK || dirs[0] < 0 || dirs[1] < 0) {
		res = st.step != STEP_OK ? describe(&st, dir, id, err, errlen) : RESULT_NODE_ERROR;
		if (st.step == STEP_OK)
			snprintf(err, errlen, "upper directory %s: its descriptors did not arrive", dir);
		goto out;
	}
	/* Then the mount, from those descriptors (child_mount). */
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot prepare the overlay on %s: %s", point, strerror(errno));
		goto out;
	}
	pid_t pid = child_fork(&pidfd);
	if (pid < 0) {
		snprintf(err, errlen, "cannot prepare the overlay on %s: fork: %s", point, strerror(errno));
		goto out;
	}
	if (pid == 0) {
		int keep[5] = { pipefd[1], lowerfd, pointfd, dirs[0], dirs[1] };

		close_all_but(keep, 5);
		child_mount(pipefd[1], id, lowerfd, pointfd, dirs[0], dirs[1]);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	/* Never a mount given less than a second: the request's time may be
	 * nearly spent by now, and a timeout here costs the caller a probe
	 * of the reader (overlay.c). */
	long long mount_deadline = squash_now_ms() + OVERLAY_MOUNT_MIN_MS;
	int ready = child_wait_readable(pipefd[0], deadline > mount_deadline ? deadline : mount_deadline);
	if (ready == 1) {
		ssize_t n = read(pipefd[0], &st, sizeof(st));
		if (n == (ssize_t)sizeof(st))
			res = st.step == STEP_OK ? RESULT_OK : describe(&st, dir, id, err, errlen);
		else
			snprintf(err, errlen, "upper directory %s: the mounting process died without an answer",
				 dir);
	} else if (ready < 0) {
		snprintf(err, errlen, "upper directory %s: squashd is stopping", dir);
	} else {
		*mount_timed_out = true;
		snprintf(err, errlen, "upper directory %s: mounting the overlay as user %s timed out "
			 "(is its file system hung?)", dir, id->name);
	}
	child_abandon(pidfd);
out:
	for (int i = 0; i < 2; i++) {
		if (pipefd[i] >= 0)
			close(pipefd[i]);
		if (dirs[i] >= 0)
			close(dirs[i]);
	}
	if (lowerfd >= 0)
		close(lowerfd);
	if (pointfd >= 0)
		close(pointfd);
	return res;
}

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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "process/child_process.h"
#include "clock.h"

enum step {
	STEP_OK,
	STEP_BECOME,    /* switching to the user with CAP_SYS_ADMIN only */
	STEP_OPEN,      /* opening DIR as the user */
	STEP_NOT_DIR,
	STEP_NOT_OWNER, /* DIR, DIR/upper or DIR/work is not the user's */
	STEP_SUBDIR,    /* creating or opening DIR/upper or DIR/work */
	STEP_MOUNT,
};

struct upper_status {
	int step;
	int err;
	unsigned owner;      /* STEP_NOT_OWNER: the owner found */
	char which[8];       /* "", "upper" or "work" */
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

static void child_mount(int out, const char *dir, const struct identity *id, int lowerfd,
			int pointfd)
{
	struct upper_status st = { .step = STEP_OK };
	struct stat sb;
	char opts[256], target[64];
	int dfd, ufd, wfd;

	if (become_user_with_sys_admin(id) < 0) {
		st.step = STEP_BECOME;
		st.err = errno;
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		st.step = errno == ENOTDIR ? STEP_NOT_DIR : STEP_OPEN;
		st.err = errno;
		goto out;
	}
	if (fstat(dfd, &sb) < 0) {
		st.step = STEP_OPEN;
		st.err = errno;
		goto out;
	}
	if (sb.st_uid != id->uid) {
		st.step = STEP_NOT_OWNER;
		st.owner = (unsigned)sb.st_uid;
		goto out;
	}
	if ((ufd = open_subdir(dfd, "upper", 0755, id->uid, &st)) < 0 ||
	    (wfd = open_subdir(dfd, "work", 0700, id->uid, &st)) < 0)
		goto out;
	st.which[0] = '\0';
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
				      char *err, size_t errlen)
{
	struct upper_status st;
	long long deadline = squash_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int pipefd[2], pidfd;
	/* Opened as root: the user cannot reach squashd's mount directory. */
	int lowerfd = open(lower, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int pointfd = open(point, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	enum result res = RESULT_NODE_ERROR;

	if (lowerfd < 0 || pointfd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot prepare the overlay on %s: %s", point, strerror(errno));
		goto out;
	}
	pid_t pid = child_fork(&pidfd);
	if (pid < 0) {
		snprintf(err, errlen, "cannot prepare the overlay on %s: fork: %s", point, strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		goto out;
	}
	if (pid == 0) {
		close(pipefd[0]);
		child_mount(pipefd[1], dir, id, lowerfd, pointfd);
	}
	close(pipefd[1]);
	int ready = child_wait_readable(pipefd[0], deadline);
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
		snprintf(err, errlen, "upper directory %s: opening it as user %s timed out "
			 "(is its file system hung?)", dir, id->name);
	}
	close(pipefd[0]);
	child_abandon(pidfd);
out:
	if (lowerfd >= 0)
		close(lowerfd);
	if (pointfd >= 0)
		close(pointfd);
	return res;
}

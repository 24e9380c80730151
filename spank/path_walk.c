/* Walking a path without following symlinks (see path_walk.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imagespec.h"
#include "path_walk.h"
#include "user_fuse.h"

/* Whether fd, a component just opened below a directory on mount
 * *mount_id, may be looked into as root; *mount_id moves to fd's mount.
 * A FUSE file system that a user mounted (with allow_other) or that was
 * mounted without it is not: once its server has read a request of the
 * walk's and sits on it, not even SIGKILL ends the wait, and a task left
 * unkillable drains the node. Only a new mount is judged (mountinfo is
 * read then); its id comes without asking any file system. */
static bool mount_may_be_entered(int fd, uint64_t *mount_id, const char *shown, char *err, size_t errlen)
{
	char why[512];
	uint64_t id = squash_mount_id(fd, why, sizeof why);

	if (id && id == *mount_id)
		return true;
	if (squash_user_fuse_refuses(fd, why, sizeof why)) {
		snprintf(err, errlen, "%s is on a FUSE file system that a user mounted, one mounted without "
			 "allow_other, or a mount that cannot be checked: a job's task does not look into one as "
			 "root (a server that never answers would leave the task unkillable); choose a target "
			 "outside it", shown);
		return false;
	}
	*mount_id = id;
	return true;
}

/* Opens one directory below dirfd without following a symlink; shown is
 * the path up to and including name, for messages. With mount_id (the
 * mount dirfd is on), a user's FUSE mount is not entered. */
static int open_component(int dirfd, const char *name, const char *shown, uint64_t *mount_id,
			  char *err, size_t errlen)
{
	struct stat st;
	int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
		return -1;
	}
	if (mount_id && !mount_may_be_entered(fd, mount_id, shown, err, errlen)) {
		close(fd);
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
	} else if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "%s is a symbolic link", shown);
	} else if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", shown);
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

static int walk(int dirfd, const char *path, size_t skip, bool create, uint64_t *mount_id, char *err,
		size_t errlen)
{
	char buf[SQUASH_PATH_MAX];
	char *p, *slash;
	int fd;

	if (strlen(path) >= sizeof buf || skip > strlen(path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	strcpy(buf, path);
	fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	for (p = buf + skip; *p; p = slash + 1) {
		int next;

		slash = strchr(p, '/');
		if (slash)
			*slash = '\0';
		if (!strcmp(p, ".") || !strcmp(p, "..") || !*p) {
			snprintf(err, errlen, "%s: not a normalised path", path);
			close(fd);
			return -1;
		}
		if (create && mkdirat(fd, p, 0755) == 0) {
			/* fchmodat: the umask must not make the target unreachable. */
			fchmodat(fd, p, 0755, 0);
		} else if (create && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", buf, strerror(errno));
			close(fd);
			return -1;
		}
		next = open_component(fd, p, buf, mount_id, err, errlen);
		close(fd);
		if (next < 0)
			return -1;
		fd = next;
		if (!slash)
			break;
		*slash = '/';
	}
	return fd;
}

int squash_path_walk(int dirfd, const char *path, size_t skip, bool create,
		     char *err, size_t errlen)
{
	return walk(dirfd, path, skip, create, NULL, err, errlen);
}

int squash_path_walk_from_root(const char *path, char *err, size_t errlen)
{
	uint64_t mount_id;
	int root, fd;

	if (path[0] != '/') {
		snprintf(err, errlen, "%s: not an absolute path", path);
		return -1;
	}
	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		snprintf(err, errlen, "/: %s", strerror(errno));
		return -1;
	}
	mount_id = squash_mount_id(root, err, errlen);
	fd = walk(root, path, 1, false, &mount_id, err, errlen);
	close(root);
	return fd;
}

/* Walking a path without following symlinks (see path_walk.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imagespec.h"
#include "path_walk.h"

/* Opens one directory below dirfd without following a symlink; shown is
 * the path up to and including name, for messages. */
static int open_component(int dirfd, const char *name, const char *shown,
			  char *err, size_t errlen)
{
	struct stat st;
	int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
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

int squash_path_walk(int dirfd, const char *path, size_t skip, bool create,
		     char *err, size_t errlen)
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
		next = open_component(fd, p, buf, err, errlen);
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

int squash_path_walk_from_root(const char *path, char *err, size_t errlen)
{
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
	fd = squash_path_walk(root, path, 1, false, err, errlen);
	close(root);
	return fd;
}

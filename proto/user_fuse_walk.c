/* Opening a user's path without asking a user's FUSE server anything
 * (user_fuse_walk.h). */
#include "config.h"

#include "user_fuse_walk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "mountinfo.h"
#include "user_fuse.h"

#ifndef PROC_SUPER_MAGIC
#define PROC_SUPER_MAGIC 0x9fa0
#endif

struct walk {
	struct squash_mount_table table;
	bool have_table;
	struct squash_fit_mounts *fit; /* NULL: none kept */
	uint64_t judged;  /* the last mount found fit for the file itself (0: none yet) */
	uint64_t passed;  /* the last mount only passed through (0: none yet) */
	char *why;
	size_t len;
};

/* The mount id of fd, or 0 (why set, errno EPERM). */
static uint64_t mount_of(struct walk *w, int fd)
{
	uint64_t id = squash_mount_id(fd, w->why, w->len);

	if (!id)
		errno = EPERM;
	return id;
}

/* Whether fd's mount may be entered (only to pass through it: what it is
 * stacked on may not be visible here, a container's root for one, and
 * open(2) went through such mounts all the same; final: the file itself
 * lies there, judged strictly, as ever). Else why is set, errno EPERM. */
static bool walkable(struct walk *w, int fd, bool final)
{
	uint64_t id = mount_of(w, fd);
	char cause[256];
	int verdict;

	if (!id)
		return false;
	if (id == w->judged || (!final && id == w->passed))
		return true;
	uint64_t unique = w->fit ? squash_mount_unique_id(fd) : 0;
	if (unique && squash_fit_mounts_has(w->fit, unique)) {
		w->judged = id;
		return true;
	}
	if (!w->have_table) {
		if (squash_mount_table_read("/proc/self/mountinfo", &w->table, cause, sizeof(cause)) < 0) {
			snprintf(w->why, w->len, "cannot be checked for a user's FUSE server (%s); squashd does "
				 "not open images it cannot check", cause);
			errno = EPERM;
			return false;
		}
		w->have_table = true;
	}
	verdict = squash_user_fuse_verdict(&w->table, id, false, w->why, w->len);
	if (verdict == SQUASH_FUSE_OK) {
		w->judged = id;
		if (unique && squash_mount_is_plain(&w->table, id))
			squash_fit_mounts_add(w->fit, unique);
		return true;
	}
	if (verdict == SQUASH_FUSE_UNKNOWN && !final) {
		w->passed = id;
		if (w->len)
			w->why[0] = '\0';
		return true;
	}
	errno = EPERM;
	return false;
}

/* Puts text (len bytes) in front of the rest of the path to walk, rest
 * (in buf, PATH_MAX): 0, or -1 with ENAMETOOLONG. */
static int prepend(char *buf, char **rest, const char *text, size_t len)
{
	size_t left = strlen(*rest);

	if (len + 1 + left + 1 > PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memmove(buf + len + 1, *rest, left + 1);
	memcpy(buf, text, len);
	buf[len] = left ? '/' : '\0';
	*rest = buf;
	return 0;
}

static int walk(struct walk *w, const char *path, bool strict, bool *last_is_link)
{
	char buf[PATH_MAX], target[PATH_MAX], *rest = buf;
	unsigned links = 0;
	int dirfd, e;

	if (strlen(path) >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", path);
	dirfd = open(*path == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -1;
	/* The node's own root is the admin's, whatever mountinfo can tell of
	 * it (under a chroot it is not even listed): passed through. */
	if (*path == '/' && !(w->passed = mount_of(w, dirfd)))
		goto fail;
	for (;;) {
		char *name, *slash;
		bool last;
		struct stat st;
		int fd;

		/* The directory the next lookup happens in. */
		if (!walkable(w, dirfd, false))
			goto fail;
		while (*rest == '/')
			rest++;
		if (!*rest) /* "/" or a path ending in "/" */
			return dirfd;
		name = rest;
		slash = strchr(rest, '/');
		if (slash) {
			*slash = '\0';
			rest = slash + 1;
			while (*rest == '/')
				rest++;
		} else {
			rest = name + strlen(name);
		}
		last = !*rest && !slash;
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			goto fail;
		/* Where the lookup landed (a mount on it is entered here): judged
		 * before its attributes are looked at. */
		if (!walkable(w, fd, strict && last) || fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
			e = errno;
			close(fd);
			errno = e;
			goto fail;
		}
		if (!S_ISLNK(st.st_mode)) {
			if (!last && !S_ISDIR(st.st_mode)) {
				close(fd);
				errno = ENOTDIR;
				goto fail;
			}
			close(dirfd);
			dirfd = fd;
			if (last)
				return dirfd;
			continue;
		}
		if (last && !slash) {
			close(fd);
			*last_is_link = true;
			errno = ELOOP;
			goto fail;
		}
		if (++links > SQUASH_WALK_LINKS_MAX) {
			close(fd);
			errno = ELOOP;
			goto fail;
		}
		struct statfs sf;

		if (fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
			/* /proc/PID/root, /proc/self/fd/N: the kernel jumps to
			 * the object, looking nothing up on the way. */
			close(fd);
			fd = openat(dirfd, name, O_PATH | O_CLOEXEC);
			if (fd < 0)
				goto fail;
			close(dirfd);
			dirfd = fd;
			continue;
		}
		ssize_t n = readlinkat(fd, "", target, sizeof(target));

		e = errno;
		close(fd);
		if (n < 0 || (size_t)n >= sizeof(target)) {
			errno = n < 0 ? e : ENAMETOOLONG;
			goto fail;
		}
		if (prepend(buf, &rest, target, (size_t)n) < 0)
			goto fail;
		if (*rest == '/') {
			close(dirfd);
			if ((dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
				return -1;
		}
	}
fail:
	e = errno;
	close(dirfd);
	errno = e;
	return -1;
}

bool squash_fit_mounts_has(const struct squash_fit_mounts *f, uint64_t id)
{
	for (uint32_t i = 0; i < f->n && i < SQUASH_FIT_MOUNTS_MAX; i++)
		if (f->ids[i] == id)
			return true;
	return false;
}

void squash_fit_mounts_add(struct squash_fit_mounts *f, uint64_t id)
{
	if (squash_fit_mounts_has(f, id))
		return;
	if (f->n < SQUASH_FIT_MOUNTS_MAX) {
		f->ids[f->n++] = id;
		return;
	}
	f->ids[f->next % SQUASH_FIT_MOUNTS_MAX] = id;
	f->next = (f->next + 1) % SQUASH_FIT_MOUNTS_MAX;
}

int squash_open_beside_user_fuse(const char *path, bool strict, bool *last_is_link,
				 struct squash_fit_mounts *fit, char *why, size_t len)
{
	struct walk w = { .fit = fit, .why = why, .len = len };
	int fd, e;

	*last_is_link = false;
	if (len)
		why[0] = '\0';
	fd = walk(&w, path, strict, last_is_link);
	e = errno;
	if (w.have_table)
		squash_mount_table_free(&w.table);
	errno = e;
	return fd;
}

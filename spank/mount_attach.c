/* Attaching the job's mounts on their targets (see mount_attach.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "mount_attach.h"
#include "path_walk.h"
#include "target.h"

static void fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* Mounts a small tmpfs on base (which must exist) and returns a descriptor
 * of the tmpfs' root, so targets below base are made in the step only. */
static int mount_base(const char *base, char *err, size_t errlen)
{
	char at[64], why[512];
	int fd = squash_path_walk_from_root(base, why, sizeof why);

	if (fd < 0) {
		snprintf(err, errlen, "base directory %s: %s", base, why);
		return -1;
	}
	fd_path(fd, at, sizeof at);
	if (mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
		snprintf(err, errlen, "cannot mount a tmpfs on %s: %s", base, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	/* A fresh lookup lands on the tmpfs, not on the directory below it. */
	fd = squash_path_walk_from_root(base, why, sizeof why);
	if (fd < 0)
		snprintf(err, errlen, "base directory %s: %s", base, why);
	return fd;
}

/* True when target lies strictly below base. */
static bool below(const char *target, const char *base)
{
	size_t n = strlen(base);

	return !strncmp(target, base, n) && target[n] == '/' && target[n + 1];
}

/* Attaches tree (a detached copy of the node-level mount, open_tree) on
 * target, read-only (unless it is the job's writable overlay), nosuid,
 * nodev. The attributes are set before the mount appears. */
static int bind_one(const Squash__JobMount *jm, int tree, const char *base, int basefd,
		    char *err, size_t errlen)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			    (jm->has_writable && jm->writable ? 0 : MOUNT_ATTR_RDONLY),
	};
	char why[512];
	int fd;

	if (squash_is_system_path(jm->target)) {
		snprintf(err, errlen, "refusing to mount %s on system path %s", jm->image, jm->target);
		return -1;
	}
	if (base && below(jm->target, base))
		fd = squash_path_walk(basefd, jm->target, strlen(base) + 1, true, why, sizeof why);
	else
		fd = squash_path_walk_from_root(jm->target, why, sizeof why);
	if (fd < 0) {
		snprintf(err, errlen, "cannot mount %s on %s: %s", jm->image, jm->target, why);
		return -1;
	}
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
		snprintf(err, errlen, "cannot make %s %s on %s: %s", jm->image,
			 attr.attr_set & MOUNT_ATTR_RDONLY ? "read-only" : "nosuid,nodev",
			 jm->target, strerror(errno));
		close(fd);
		return -1;
	}
	if (move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
		snprintf(err, errlen, "cannot mount %s on %s: attaching %s: %s", jm->image,
			 jm->target, jm->source, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int squash_attach_job_mounts(const Squash__Response *resp, const int *trees, char *err,
			     size_t errlen)
{
	const char *base = resp->base_dir && *resp->base_dir ? resp->base_dir : NULL;
	int basefd = -1, rc = 0;

	if (resp->n_job_mounts == 0) {
		snprintf(err, errlen, "squashd reported no images for this job");
		return -1;
	}
	if (base) {
		if (base[0] != '/' || squash_is_system_path(base)) {
			snprintf(err, errlen, "squashd reported an unusable base directory %s", base);
			return -1;
		}
		basefd = mount_base(base, err, errlen);
		if (basefd < 0)
			return -1;
	}
	for (size_t i = 0; i < resp->n_job_mounts && rc == 0; i++)
		if (trees[i] >= 0) /* -1: merged with an earlier image at its target */
			rc = bind_one(resp->job_mounts[i], trees[i], base, basefd, err, errlen);
	if (basefd >= 0)
		close(basefd);
	return rc;
}

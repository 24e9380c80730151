#include "config.h"
#include "core/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "imagespec.h"
#include "target.h"

bool policy_may_send(const struct peer *peer, Squash__Request__OpCase op,
		     char *err, size_t errlen)
{
	if (peer->uid == 0)
		return true;
	switch (op) {
	case SQUASH__REQUEST__OP_LIST:
	case SQUASH__REQUEST__OP_STEP_INFO:
	case SQUASH__REQUEST__OP_STATUS:
	case SQUASH__REQUEST__OP_SESSION_MOUNT: /* for the sender itself, as its user */
		return true;
	case SQUASH__REQUEST__OP_GC:
		snprintf(err, errlen, "only root may run gc");
		return false;
	case SQUASH__REQUEST__OP_MOUNT_JOB:
		snprintf(err, errlen, "only root (the Slurm prolog) may ask to mount images");
		return false;
	case SQUASH__REQUEST__OP_RELEASE_JOB:
		snprintf(err, errlen, "only root (the Slurm epilog or an admin) may release a job");
		return false;
	default:
		snprintf(err, errlen, "unknown request");
		return false;
	}
}

enum result policy_check_mount_request(const struct squashd_config *cfg,
				       const Squash__MountJobRequest *req,
				       char *err, size_t errlen)
{
	if (req->n_images == 0) {
		snprintf(err, errlen, "the job names no image");
		return RESULT_USER_ERROR;
	}
	if (req->n_images > cfg->max_images_per_job) {
		snprintf(err, errlen, "too many images (%zu, this node allows at most %u per job)",
			 req->n_images, cfg->max_images_per_job);
		return RESULT_USER_ERROR;
	}
	for (size_t i = 0; i < req->n_images; i++) {
		const Squash__ImageSpec *spec = req->images[i];
		if (spec->image[0] != '/') {
			snprintf(err, errlen, "image '%s': path is not absolute", spec->image);
			return RESULT_USER_ERROR;
		}
		char why[SQUASH_PATH_MAX + 256];
		if (squash_target_check(spec->target, &cfg->allowed_targets, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "image %s: %s", spec->image, why);
			return RESULT_USER_ERROR;
		}
		for (size_t j = 0; j < i; j++) {
			/* The same target twice, or nested targets (target.c). */
			if (squash_target_pair_check(req->images[j]->image, req->images[j]->target,
						     spec->image, spec->target, why, sizeof(why)) < 0) {
				snprintf(err, errlen, "%s", why);
				return RESULT_USER_ERROR;
			}
		}
	}
	return RESULT_OK;
}

/* Writable by someone other than root: whoever that is could swap the
 * image the kernel is about to parse. */
static bool root_controlled(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Trusted: the file the user's descriptor points at lies below a trusted
 * prefix, and it and every directory above it are root-controlled. The path
 * comes from the descriptor, not from the request. */
static bool image_is_trusted(const struct squashd_config *cfg, int image_fd,
			     const struct stat *st)
{
	if (!root_controlled(st))
		return false;
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", image_fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(path) - 1)
		return false;
	path[n] = '\0';
	if (path[0] != '/')
		return false; /* " (deleted)" files and anonymous files */

	if (!squash_prefixes_contain(&cfg->trusted_prefixes, path))
		return false;

	for (char *slash = strrchr(path, '/'); slash; slash = strrchr(path, '/')) {
		if (slash == path)
			slash[1] = '\0';
		else
			*slash = '\0';
		struct stat dir;
		if (lstat(path, &dir) < 0 || !S_ISDIR(dir.st_mode))
			return false;
		/* In a sticky directory (/tmp) others cannot rename root's entries. */
		bool sticky_ok = (dir.st_mode & S_ISVTX) && dir.st_uid == 0;
		if (!root_controlled(&dir) && !sticky_ok)
			return false;
		if (slash == path)
			break;
	}
	return true;
}

Squash__MountMode policy_mount_mode(const struct squashd_config *cfg,
				    int image_fd, const struct stat *st)
{
	switch (cfg->mount_policy) {
	case MOUNT_POLICY_FUSE:
		return SQUASH__MOUNT_MODE__FUSE;
	case MOUNT_POLICY_KERNEL:
		return SQUASH__MOUNT_MODE__KERNEL;
	case MOUNT_POLICY_AUTO:
		break;
	}
	return image_is_trusted(cfg, image_fd, st) ? SQUASH__MOUNT_MODE__KERNEL
						   : SQUASH__MOUNT_MODE__FUSE;
}

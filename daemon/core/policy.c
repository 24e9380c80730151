#include "config.h"
#include "core/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/trusted_image.h"
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
			/* Nested targets, or :rw in a merge group (target.c). */
			if (squash_target_merge_check(req->images[j]->image, req->images[j]->target,
						      req->images[j]->has_writable && req->images[j]->writable,
						      spec->image, spec->target,
						      spec->has_writable && spec->writable, why, sizeof(why)) < 0) {
				snprintf(err, errlen, "%s", why);
				return RESULT_USER_ERROR;
			}
		}
	}
	return RESULT_OK;
}

Squash__MountMode policy_mount_mode(const struct squashd_config *cfg, int image_fd,
				    int *kernel_fd, char *why, size_t whylen)
{
	*kernel_fd = -1;
	why[0] = '\0';
	switch (cfg->mount_policy) {
	case MOUNT_POLICY_FUSE:
		return SQUASH__MOUNT_MODE__FUSE;
	case MOUNT_POLICY_KERNEL: /* the admin gave the promise up (squashd.conf(5)) */
		*kernel_fd = fcntl(image_fd, F_DUPFD_CLOEXEC, 3);
		return *kernel_fd >= 0 ? SQUASH__MOUNT_MODE__KERNEL : SQUASH__MOUNT_MODE__FUSE;
	case MOUNT_POLICY_AUTO:
		break;
	}
	*kernel_fd = trusted_image_open(cfg, image_fd, why, whylen);
	return *kernel_fd >= 0 ? SQUASH__MOUNT_MODE__KERNEL : SQUASH__MOUNT_MODE__FUSE;
}

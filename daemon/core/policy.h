/* squashd's decisions: who may ask what, which targets and how many images
 * a job may have, and how an image is mounted. The plugin repeats some of
 * these checks only to fail early; these are the ones that count. */
#ifndef SQUASHD_POLICY_H
#define SQUASHD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "settings/settings.h"
#include "util/peer.h"
#include "util/result.h"
#include "squash.pb-c.h"

/* Root may send every request; other users only list and step_info (the
 * latter is further limited to their own jobs by the caller). */
bool policy_may_send(const struct peer *peer, Squash__Request__OpCase op,
		     char *err, size_t errlen);

/* Image count, absolute image paths, targets allowed, distinct and not
 * nested. */
enum result policy_check_mount_request(const struct squashd_config *cfg,
				       const Squash__MountJobRequest *req,
				       char *err, size_t errlen);

/* How to mount an image already opened (as the user) on image_fd. For a
 * kernel mount, *kernel_fd is the descriptor the loop device gets: root's
 * own, of the trusted file (core/trusted_image.h); the caller closes it.
 * For FUSE, why says why a candidate below a trusted prefix was refused
 * ("" when the image was no candidate). */
Squash__MountMode policy_mount_mode(const struct squashd_config *cfg, int image_fd,
				    int *kernel_fd, char *why, size_t whylen);

#endif

/* A read-only overlay made of lower layers only: the merged tree of
 * several images at one target (core/merge.h). */
#ifndef SQUASHD_OVERLAY_LOWERS_H
#define SQUASHD_OVERLAY_LOWERS_H

#include <stddef.h>

#include "util/result.h"

/* overlayfs takes at most this many lower layers in one mount. */
#define OVERLAY_LOWERS_PER_MOUNT 500
/* ... and may stack only once more on top of its layers (the kernel's
 * FILESYSTEM_MAX_STACK_DEPTH is 2: squashfs or FUSE, an overlay, an
 * overlay of overlays), so one merged tree holds at most this many. */
#define OVERLAY_LOWERS_MAX (OVERLAY_LOWERS_PER_MOUNT * OVERLAY_LOWERS_PER_MOUNT)

/* Mounts, on the existing directory point, a read-only (nosuid, nodev)
 * overlay of lowers[0..n), lowers[0] at the bottom (a later layer hides
 * an earlier one's paths). Layers are given one by one through the new
 * mount API's "lowerdir+" where the kernel has it (Linux 6.8), otherwise
 * in one "lowerdir=" option (then bounded by the page size). More than
 * OVERLAY_LOWERS_PER_MOUNT layers are stacked: overlays of up to that many
 * each, mounted at point.N, become the lowers of the top one and are then
 * detached again (overlayfs keeps private copies of its layers). Redirects
 * and metacopy are not followed (images are users' files). */
enum result overlay_mount_lowers(const char *point, const char *const *lowers, size_t n,
				 char *err, size_t errlen);

#endif

/* FUSE mounts: root opens /dev/fuse and mounts it (ro, nosuid, nodev,
 * allow_other, default_permissions) at mountpoint, then starts squashfuse_ll
 * as the job user, handing it the image and /dev/fuse descriptors
 * (/dev/fd/N paths), so the server never runs as root and never opens the
 * image path. */
#ifndef SQUASHD_MOUNT_FUSE_H
#define SQUASHD_MOUNT_FUSE_H

#include <sys/types.h>

#include "mount/identity.h"
#include "util/result.h"

/* Mounts the image open on image_fd at mountpoint (an existing empty
 * directory). Waits until the file system answers (bounded by timeout_ms).
 * On RESULT_OK stores the server's pid (a child of squashd, in its own
 * session) and a pidfd for it (the caller owns it). On failure nothing is
 * left mounted and no server is running. */
enum result fuse_mount_image(int image_fd, const char *mountpoint,
			     const struct identity *id,
			     const char *squashfuse_path, int timeout_ms,
			     pid_t *server_pid, int *server_pidfd, char *err,
			     size_t errlen);

#endif

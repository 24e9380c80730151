/* Kernel mounts: attach the image descriptor to a loop device read-only with
 * autoclear (LOOP_CONFIGURE, falling back to LOOP_SET_FD+LOOP_SET_STATUS64),
 * retrying with a short random backoff on EBUSY/EAGAIN, then mount squashfs
 * ro,nosuid,nodev. Never clears a device this process did not attach; on any
 * failure no loop device is left attached. */
#ifndef SQUASHD_MOUNT_LOOP_H
#define SQUASHD_MOUNT_LOOP_H

#include <stddef.h>

#include "util/result.h"

/* On RESULT_OK writes the device name ("/dev/loop3") into loop_dev. */
enum result loop_mount_image(int image_fd, const char *mountpoint,
			     char *loop_dev, size_t loop_dev_len, char *err,
			     size_t errlen);

#endif

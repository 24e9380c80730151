#include "config.h"

#include "mount/mount_loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <pthread.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

/* Kernel headers older than 5.8 lack LOOP_CONFIGURE; the ABI is fixed. */
#ifndef LOOP_CONFIGURE
#define LOOP_CONFIGURE 0x4C0A
struct loop_config {
	uint32_t fd;
	uint32_t block_size;
	struct loop_info64 info;
	uint64_t __reserved[8];
};
#endif

#define LOOP_ATTACH_TRIES 10

/* Loop devices are taken one at a time on this node: concurrent
 * LOOP_CTL_GET_FREE callers get the same device and race for it. mount(2)
 * runs outside the lock: it reads the image, which may be slow. */
static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

static void random_backoff(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	unsigned ms = 1 + (unsigned)((ts.tv_nsec ^ getpid()) % 20);
	usleep(ms * 1000);
}

/* Old kernels: attach, then set the flags; undo the attach if the flags
 * cannot be set (the device is ours: we just attached it). Returns 0 or
 * -1 with errno. */
static int attach_legacy(int loop_fd, int image_fd)
{
	struct loop_info64 info;

	if (ioctl(loop_fd, LOOP_SET_FD, image_fd) < 0)
		return -1;
	memset(&info, 0, sizeof(info));
	info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
	if (ioctl(loop_fd, LOOP_SET_STATUS64, &info) < 0) {
		int saved = errno;

		ioctl(loop_fd, LOOP_CLR_FD, 0);
		errno = saved;
		return -1;
	}
	return 0;
}

/* Attaches image_fd to a free loop device. Returns the open loop fd (still
 * needed until mount(2) is done) or -1 with err set. */
static int attach_free_device(int image_fd, char *loop_dev,
			      size_t loop_dev_len, char *err, size_t errlen)
{
	bool use_legacy = false;
	int ctl, loop_fd = -1, last_errno = 0;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0) {
		snprintf(err, errlen, "cannot open /dev/loop-control: %s",
			 strerror(errno));
		return -1;
	}
	for (int attempt = 0; attempt < LOOP_ATTACH_TRIES; attempt++) {
		struct loop_config cfg;
		int n, rc = -1;

		if (attempt > 0)
			random_backoff();
		n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			snprintf(err, errlen, "no free loop device: %s",
				 strerror(errno));
			break;
		}
		snprintf(loop_dev, loop_dev_len, "/dev/loop%d", n);
		/* Read-only open: the device is read-only anyway. */
		loop_fd = open(loop_dev, O_RDONLY | O_CLOEXEC);
		if (loop_fd < 0) {
			last_errno = errno;
			if (errno == ENOENT) /* node not created yet */
				continue;
			snprintf(err, errlen, "cannot open %s: %s", loop_dev,
				 strerror(errno));
			break;
		}
		if (!use_legacy) {
			memset(&cfg, 0, sizeof(cfg));
			cfg.fd = (uint32_t)image_fd;
			cfg.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
			rc = ioctl(loop_fd, LOOP_CONFIGURE, &cfg);
			if (rc < 0 && (errno == EINVAL || errno == ENOTTY)) {
				log_debug("LOOP_CONFIGURE unsupported (%s), using LOOP_SET_FD",
					  strerror(errno));
				use_legacy = true;
			}
		}
		if (use_legacy)
			rc = attach_legacy(loop_fd, image_fd);
		if (rc == 0) {
			close(ctl);
			return loop_fd;
		}
		last_errno = errno;
		close(loop_fd);
		loop_fd = -1;
		/* Someone took the device first, or udev is probing it. */
		if (errno == EBUSY || errno == EAGAIN)
			continue;
		snprintf(err, errlen, "cannot attach image to %s: %s", loop_dev,
			 strerror(errno));
		close(ctl);
		return -1;
	}
	if (errlen > 0 && err[0] == '\0')
		snprintf(err, errlen,
			 "no loop device could be attached after %d tries: %s",
			 LOOP_ATTACH_TRIES, strerror(last_errno));
	close(ctl);
	return -1;
}

/* Detaches a device this process attached and still holds open. With other
 * openers (udev) the kernel defers the detach to the last close. */
static void detach_ours(int loop_fd, const char *loop_dev)
{
	if (ioctl(loop_fd, LOOP_CLR_FD, 0) < 0 && errno != ENXIO)
		log_warning("detaching %s: %s (autoclear detaches it on last close)",
			    loop_dev, strerror(errno));
	close(loop_fd);
}

enum result loop_mount_image(int image_fd, const char *mountpoint,
			     char *loop_dev, size_t loop_dev_len, char *err,
			     size_t errlen)
{
	int loop_fd, ro = 0;

	if (errlen > 0)
		err[0] = '\0';
	if (loop_dev_len > 0)
		loop_dev[0] = '\0';
	pthread_mutex_lock(&attach_lock);
	loop_fd = attach_free_device(image_fd, loop_dev, loop_dev_len, err,
				     errlen);
	pthread_mutex_unlock(&attach_lock);
	if (loop_fd < 0)
		return RESULT_NODE_ERROR;

	if (ioctl(loop_fd, BLKROGET, &ro) < 0 || ro != 1) {
		snprintf(err, errlen, "%s is not read-only after attaching; refusing to mount it",
			 loop_dev);
		detach_ours(loop_fd, loop_dev);
		loop_dev[0] = '\0';
		return RESULT_NODE_ERROR;
	}

	/* Our descriptor keeps the device attached until the mount holds it;
	 * after that autoclear detaches it when the mount goes away. */
	if (mount(loop_dev, mountpoint, "squashfs",
		  MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
		int e = errno;
		enum result res;

		if (e == EINVAL) {
			snprintf(err, errlen,
				 "the kernel could not mount the image as squashfs: %s",
				 strerror(e));
			res = RESULT_USER_ERROR;
		} else {
			snprintf(err, errlen, "mounting %s on %s: %s", loop_dev,
				 mountpoint, strerror(e));
			res = RESULT_NODE_ERROR;
		}
		detach_ours(loop_fd, loop_dev);
		loop_dev[0] = '\0';
		return res;
	}
	close(loop_fd);
	log_debug("mounted %s on %s", loop_dev, mountpoint);
	return RESULT_OK;
}

#include "config.h"

#include "mount/fuse_abort.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

/* The connection's abort file under /sys/fs/fuse/connections or, where
 * fusectl is not mounted in squashd's namespace, under a mount of it of
 * squashd's own that is attached nowhere (closed with the file). */
static int open_abort(const char *rel)
{
	int dir = open("/sys/fs/fuse/connections", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int fd = dir >= 0 ? openat(dir, rel, O_WRONLY | O_CLOEXEC) : -1;

	if (dir >= 0)
		close(dir);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	int fs = fsopen("fusectl", FSOPEN_CLOEXEC), mnt = -1;
	if (fs >= 0 && fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	fd = mnt >= 0 ? openat(mnt, rel, O_WRONLY | O_CLOEXEC) : -1;
	int e = errno;
	if (mnt >= 0)
		close(mnt);
	if (fs >= 0)
		close(fs);
	errno = e;
	return fd;
}

bool fuse_abort_mount(const char *mount_point)
{
	struct statx stx;
	char path[96];

	/* From the kernel's inode (DONT_SYNC): the server is not asked. */
	if (statx(AT_FDCWD, mount_point, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW,
		  STATX_TYPE, &stx) < 0 || !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) ||
	    stx.stx_dev_major != 0) {
		log_warning("cannot abort the FUSE connection of %s: not a FUSE mount's root", mount_point);
		return false;
	}
	/* A connection's number is its superblock's device, which no other
	 * file system shares: the directory exists only for a FUSE mount. */
	snprintf(path, sizeof(path), "%u/abort", stx.stx_dev_minor);
	int fd = open_abort(path);
	bool done = fd >= 0 && write(fd, "1", 1) == 1;
	int e = errno;

	if (fd >= 0)
		close(fd);
	if (!done)
		log_warning("cannot abort the FUSE connection of %s (fusectl's %s): %s", mount_point, path,
			    strerror(e));
	return done;
}

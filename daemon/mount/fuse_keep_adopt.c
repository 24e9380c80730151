/* Kept connections for adopted mounts (fuse_keep_adopt.h). */
#include "config.h"

#include "mount/fuse_keep_adopt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mount/mount_users.h"
#include "util/close_detached.h"
#include "util/log.h"

#define FDINFO_MAX 4096
#define MOUNTINFO_MAX (4u << 20)

static int copy_fd(int pidfd, int fd)
{
#ifdef SYS_pidfd_getfd
	return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* The FUSE connection number of the mount at mount_point: the minor of
 * its device (major 0); -1 when it is no such mount. */
static long mount_connection(const char *mount_point)
{
	char *info = mount_users_read_file("/proc/self/mountinfo", MOUNTINFO_MAX);
	struct mount_identity id;
	unsigned major, minor;

	if (!info)
		return -1;
	mount_users_identity(info, mount_point, &id);
	free(info);
	if (sscanf(id.dev, "%u:%u", &major, &minor) != 2 || major != 0)
		return -1;
	return minor;
}

/* The connection number the kernel gives for our descriptor fd of
 * /dev/fuse; -1 when it gives none (older kernels, or not attached). */
static long fd_connection(int fd)
{
	char path[64], *info, *field;
	unsigned long conn;
	long r = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	info = mount_users_read_file(path, FDINFO_MAX);
	field = info ? strstr(info, "\nfuse_connection:") : NULL;
	if (field && sscanf(field + strlen("\nfuse_connection:"), "%lu", &conn) == 1)
		r = (long)conn;
	free(info);
	return r;
}

/* Our copy is the image: device and inode from the kernel's inode, never
 * from the file system's server (AT_STATX_DONT_SYNC: a FUSE file answers
 * from its cache, even when its server is stopped). */
static bool is_image(int fd, dev_t dev, ino_t ino)
{
	struct statx stx;

	return statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) == 0 &&
	       S_ISREG(stx.stx_mode) && makedev(stx.stx_dev_major, stx.stx_dev_minor) == dev &&
	       stx.stx_ino == ino;
}

/* The device of mount mnt_id in the reader's mount namespace (its
 * mountinfo, which the kernel writes without asking any file system), 0
 * when not found. */
static dev_t mount_dev(const char *mountinfo, unsigned long mnt_id)
{
	for (const char *line = mountinfo; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		unsigned long id;
		unsigned major, minor;

		if (sscanf(line, "%lu %*u %u:%u", &id, &major, &minor) == 3 && id == mnt_id)
			return makedev(major, minor);
	}
	return 0;
}

/* The number on the line "name:" of fdinfo text, or -1. */
static long long fdinfo_field(const char *info, const char *name)
{
	size_t len = strlen(name);
	unsigned long long v;

	for (const char *line = info; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (!strncmp(line, name, len) && line[len] == ':')
			return sscanf(line + len + 1, "%llu", &v) == 1 ? (long long)v : -1;
	return -1;
}

/* Walks the reader's descriptors for the connection and the image; fills
 * *conn_fd and *image_fd with our copies (-1 when not found). The reader
 * is the user's: they may have stopped it, ptraced it, left open files of
 * their own FUSE mounts in it, and squashd holds ds->lock here. So no
 * descriptor of it is ever stat'ed, opened or followed: each is told by
 * what the kernel says without asking its file system, the magic link's
 * name (readlink) and its fdinfo (/dev/fuse names its connection; a file
 * its inode and mount), and only a descriptor that matches is copied
 * (pidfd_getfd) and checked again on our copy. */
static void find_descriptors(int pidfd, pid_t pid, long conn, dev_t image_dev, ino_t image_ino,
			     int *conn_fd, int *image_fd)
{
	char dir_path[64];
	char *mountinfo;
	DIR *dir;

	snprintf(dir_path, sizeof(dir_path), "/proc/%d/mountinfo", (int)pid);
	mountinfo = mount_users_read_file(dir_path, MOUNTINFO_MAX);
	snprintf(dir_path, sizeof(dir_path), "/proc/%d/fd", (int)pid);
	dir = opendir(dir_path);
	if (!dir) {
		free(mountinfo);
		return;
	}
	for (struct dirent *de; (*conn_fd < 0 || *image_fd < 0) && (de = readdir(dir));) {
		char path[96], target[64];
		char *end, *info;
		long fd = strtol(de->d_name, &end, 10);
		ssize_t n;

		if (de->d_name[0] == '.' || *end || fd < 0)
			continue;
		snprintf(path, sizeof(path), "%s/%ld", dir_path, fd);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		/* Sockets, pipes, anon inodes: none is ours, and an epoll's
		 * fdinfo waits for a lock its owner may hold. */
		if (target[0] != '/')
			continue;
		bool fuse = !strcmp(target, "/dev/fuse");
		if (fuse ? *conn_fd >= 0 : *image_fd >= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%ld", (int)pid, fd);
		info = mount_users_read_file(path, FDINFO_MAX);
		bool wanted = fuse ? fdinfo_field(info, "fuse_connection") == conn
				   : fdinfo_field(info, "ino") == (long long)image_ino &&
					     mountinfo && fdinfo_field(info, "mnt_id") >= 0 &&
					     mount_dev(mountinfo, (unsigned long)fdinfo_field(info, "mnt_id")) ==
						     image_dev;
		free(info);
		if (!wanted)
			continue;
		int copy = copy_fd(pidfd, (int)fd);
		if (copy < 0)
			continue;
		if (fuse && fd_connection(copy) == conn)
			*conn_fd = copy;
		else if (!fuse && is_image(copy, image_dev, image_ino))
			*image_fd = copy;
		else
			close_detached(copy);
	}
	closedir(dir);
	free(mountinfo);
}

struct fuse_keep *fuse_keep_adopt(int server_pidfd, pid_t server_pid, const char *mount_point,
				  dev_t image_dev, ino_t image_ino, const struct identity *owner,
				  char *err, size_t errlen)
{
	long conn = mount_connection(mount_point);
	int conn_fd = -1, image_fd = -1;
	struct fuse_keep *k;

	if (conn < 0) {
		snprintf(err, errlen, "%s is not a FUSE mount in squashd's namespace", mount_point);
		return NULL;
	}
	find_descriptors(server_pidfd, server_pid, conn, image_dev, image_ino, &conn_fd, &image_fd);
	if (conn_fd < 0 || image_fd < 0) {
		snprintf(err, errlen, "%s of FUSE connection %ld not found in reader pid %d "
			 "(kernels before about 6.16 do not name a descriptor's connection)",
			 conn_fd < 0 ? "the descriptor" : "the image", conn, (int)server_pid);
		if (conn_fd >= 0)
			close(conn_fd); /* /dev/fuse: no flush */
		if (image_fd >= 0)
			close_detached(image_fd);
		return NULL;
	}
	k = fuse_keep_new(conn_fd, image_fd, owner);
	close_detached(image_fd); /* the keep holds a duplicate */
	if (!k)
		snprintf(err, errlen, "out of memory");
	return k;
}

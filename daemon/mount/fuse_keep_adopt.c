/* Kept connections for adopted mounts (fuse_keep_adopt.h). */
#include "config.h"

#include "mount/fuse_keep_adopt.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mount/mount_users.h"

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

static bool is_image(int fd, dev_t dev, ino_t ino)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == dev && st.st_ino == ino;
}

/* Walks the reader's descriptors for the connection and the image; fills
 * *conn_fd and *image_fd with our copies (-1 when not found). */
static void find_descriptors(int pidfd, pid_t pid, long conn, dev_t image_dev, ino_t image_ino,
			     int *conn_fd, int *image_fd)
{
	char dir_path[64];
	DIR *dir;

	snprintf(dir_path, sizeof(dir_path), "/proc/%d/fd", (int)pid);
	dir = opendir(dir_path);
	if (!dir)
		return;
	for (struct dirent *de; (*conn_fd < 0 || *image_fd < 0) && (de = readdir(dir));) {
		char link_path[96], target[64];
		struct stat st;
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		ssize_t n;

		if (de->d_name[0] == '.' || *end || fd < 0)
			continue;
		snprintf(link_path, sizeof(link_path), "%s/%ld", dir_path, fd);
		n = readlink(link_path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		bool fuse = !strcmp(target, "/dev/fuse");
		/* The links only point the way: what counts is checked below on
		 * our own copies (the process is the user's). */
		if (fuse ? *conn_fd >= 0
			 : *image_fd >= 0 || stat(link_path, &st) < 0 || st.st_ino != image_ino)
			continue;
		int copy = copy_fd(pidfd, (int)fd);
		if (copy < 0)
			continue;
		if (fuse && fd_connection(copy) == conn)
			*conn_fd = copy;
		else if (!fuse && is_image(copy, image_dev, image_ino))
			*image_fd = copy;
		else
			close(copy);
	}
	closedir(dir);
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
			close(conn_fd);
		if (image_fd >= 0)
			close(image_fd);
		return NULL;
	}
	k = fuse_keep_new(conn_fd, image_fd, owner);
	close(image_fd);
	if (!k)
		snprintf(err, errlen, "out of memory");
	return k;
}

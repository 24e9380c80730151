/* What a descriptor is, as an object: device, inode and the mount it was
 * opened through (statx's mount id; bind mounts and other namespaces' copies
 * of a mount have ids of their own). Read from the inode as the kernel has
 * it (AT_STATX_DONT_SYNC): FUSE answers that from its cache, so asking
 * about a user's file never waits on the user's server. */
#ifndef SQUASHD_FILE_IDENTITY_H
#define SQUASHD_FILE_IDENTITY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct file_identity {
	uint64_t dev_major, dev_minor, ino;
	uint64_t mnt_id;
	bool has_mnt_id; /* kernels before 5.8 do not say */
};

/* Fills id and, when st is not NULL, the stat fields squashd uses (mode,
 * uid, gid, size, dev, ino, mtime). Returns 0, or -1 with errno. */
int file_identity_of(int fd, struct file_identity *id, struct stat *st);

bool file_identity_same(const struct file_identity *a, const struct file_identity *b);

#endif

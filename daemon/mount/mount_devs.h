/* The devices of the mounts of a mount namespace by mount id, from its
 * mountinfo (which the kernel writes without asking any file system),
 * sorted by id: an adoption parses a reader's table once, not once per
 * descriptor (mount/fuse_keep_adopt.c). */
#ifndef SQUASHD_MOUNT_DEVS_H
#define SQUASHD_MOUNT_DEVS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Mounts of one namespace looked at, at most: the kernel's fs.mount-max
 * is 100,000 by default; a reader its user moved into a namespace of
 * their own has that namespace's table, which the user fills. */
#define MOUNT_DEVS_MAX 200000

struct mount_dev {
	uint64_t id;
	dev_t dev;
};

/* Every mount's device in the mountinfo at path, by mount id (free() it),
 * read until deadline_ms (monotonic): a user's own namespace can list
 * 100,000 mounts at long paths, which the kernel takes seconds to print.
 * *late when the deadline came first (what was read is returned). */
struct mount_dev *mount_devs(const char *path, size_t *n, long long deadline_ms, bool *late);

/* The device of mount mnt_id among devs, 0 when not found. */
dev_t mount_dev(const struct mount_dev *devs, size_t n, unsigned long mnt_id);

#endif

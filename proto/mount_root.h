/* Whether a directory is the root of a mount, for both sides: a step
 * checks that what it took from squashd's namespace is an image's mount,
 * squash-shell that it sees the binds squashd made for its session, not
 * the empty directories under them. */
#ifndef SQUASH_MOUNT_ROOT_H
#define SQUASH_MOUNT_ROOT_H

#include <stdbool.h>

/* path relative to dirfd ("" : dirfd itself). True where the kernel
 * cannot tell (STATX_ATTR_MOUNT_ROOT, 5.8). */
bool squash_is_mount_root(int dirfd, const char *path);

#endif

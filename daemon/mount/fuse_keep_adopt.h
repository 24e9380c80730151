/* A kept FUSE connection (fuse_keep.h) for a mount adopted after a squashd
 * restart: squashd's own descriptor of the connection went with the old
 * squashd, but the squash-reader serving the mount still holds the
 * connection's /dev/fuse descriptor and the image's. squashd copies them
 * out of it (pidfd_getfd, which needs CAP_SYS_PTRACE) and keeps them only
 * when they are this mount's: the kernel's connection number of the
 * descriptor (fuse_connection in its fdinfo) is the minor of the mount's
 * device, and the image is the file the mount was made of. Where the
 * kernel does not say (fdinfo without fuse_connection: before Linux 6.16
 * or so), nothing is kept and a reader that dies ends the mount as
 * before. */
#ifndef SQUASHD_FUSE_KEEP_ADOPT_H
#define SQUASHD_FUSE_KEEP_ADOPT_H

#include <stddef.h>
#include <sys/types.h>

#include "mount/fuse_keep.h"
#include "process/identity.h"

/* A file the mount serves. */
struct kept_image {
	dev_t dev;
	ino_t ino;
};

/* One adoption's reads: squashd's mountinfo (its lines for mounts below
 * mount_dir), read once, and each reader's descriptors, walked once for
 * all the mounts it serves (up to 512, and a union's images each hold
 * one), not once per mount. NULL: out of memory. */
struct fuse_keep_adoption;
struct fuse_keep_adoption *fuse_keep_adoption_begin(const char *mount_dir);
void fuse_keep_adoption_end(struct fuse_keep_adoption *a);

/* server_pidfd: the reader's pidfd (not taken); mount_point: its mount in
 * squashd's namespace; images: the image the mount serves, or a union's n
 * images (bottom first). NULL with err set when not all were found. */
struct fuse_keep *fuse_keep_adopt(struct fuse_keep_adoption *a, int server_pidfd, pid_t server_pid,
				  const char *mount_point, const struct kept_image *images, size_t n,
				  const struct identity *owner, char *err, size_t errlen);

#endif

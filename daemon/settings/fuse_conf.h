/* fusermount's mount_max (/etc/fuse.conf): a non-root user's fusermount
 * refuses to mount once the caller's mount table lists that many FUSE
 * file systems (types "fuse" and "fuse.*", binds of them included), all
 * users' together. squashd's FUSE mounts and the binds squash-shell
 * sessions make of them are in that count on the node and in every
 * namespace copied from it, so each user gets a share of it
 * (core/user_fuse_mounts.h). */
#ifndef SQUASHD_FUSE_CONF_H
#define SQUASHD_FUSE_CONF_H

#define FUSE_CONF_PATH "/etc/fuse.conf"
/* fusermount's own default when fuse.conf sets none. */
#define FUSE_CONF_MOUNT_MAX_DEFAULT 1000

/* mount_max as fusermount reads it from path: the last "mount_max = N"
 * line, comments and surrounding blanks ignored; the default when the
 * file or the line is missing. Negative: fusermount sets no limit. */
int fuse_conf_mount_max(const char *path);

#endif

/* Whether a file lies on a FUSE file system served by a user (issue 30):
 * one that a user mounted (mountinfo's user_id= is not 0, as fusermount3
 * writes it) or one without allow_other. squashd never opens such images,
 * since every close of them waits for that user's server (FUSE_FLUSH);
 * the plugin says so at submission. Decided from the file's mount id
 * (statx STATX_MNT_ID with AT_STATX_DONT_SYNC) and /proc/self/mountinfo,
 * which the kernel writes without asking any file system. */
#ifndef SQUASH_USER_FUSE_H
#define SQUASH_USER_FUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *owner for a mount this namespace's mountinfo does not list: one
 * reached through another namespace (/proc/PID/root), where a user may
 * have mounted their own FUSE file system; it is refused too. */
#define SQUASH_MOUNT_ELSEWHERE (-2L)

/* fd: any descriptor of the file (O_PATH will do). True when it is on
 * such a mount, or on one this namespace does not list; *owner then gets
 * its user_id, -1 for a mount of root's without allow_other, or
 * SQUASH_MOUNT_ELSEWHERE. */
bool squash_on_user_fuse(int fd, long *owner);

/* The mount with this id in /proc/self/mountinfo (the kernel writes it
 * without asking any file system): its type and super options. Returns 1,
 * 0 when this namespace does not list it, -1 when mountinfo cannot be read. */
int squash_mount_lookup(uint64_t mnt_id, char *fstype, size_t fstype_len, char *opts, size_t opts_len);

/* fuse, fuseblk and fuse.SUBTYPE. */
bool squash_fstype_is_fuse(const char *fstype);

/* The refusal, for messages: "is on a FUSE file system ..." (no image). */
void squash_user_fuse_reason(long owner, char *buf, size_t len);

/* The same for a path (opened O_PATH, not followed further than open
 * does): true with the reason in buf. */
bool squash_user_fuse_path(const char *path, char *buf, size_t len);

#endif

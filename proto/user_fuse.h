/* Whether a file lies on a FUSE file system served by a user (issues 30
 * and 37): one that a user mounted (user_id= other than 0, as fusermount3
 * writes it) or one without allow_other, found at the file's mount or at
 * any mount below it (an overlay's layers, recursively). squashd never
 * opens such images, since every close of them waits for that user's
 * server (FUSE_FLUSH); the plugin says so at submission. Decided from the
 * file's mount id (statx STATX_MNT_ID with AT_STATX_DONT_SYNC) and
 * /proc/self/mountinfo, which the kernel writes without asking any file
 * system; no layer path is looked up. Fails closed: what cannot be told
 * (no mount id, mountinfo unreadable or not understood, layers too deep)
 * is refused too. */
#ifndef SQUASH_USER_FUSE_H
#define SQUASH_USER_FUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mountinfo.h"

/* How deep stacked mounts are followed, and how many are judged in all. */
#define SQUASH_STACK_DEPTH_MAX 8
#define SQUASH_STACK_MOUNTS_MAX 1024

/* The mount id of fd (statx STATX_MNT_ID with AT_STATX_DONT_SYNC: no file
 * system is asked), or 0 with why ("cannot be checked ...": the kernel
 * gives none). */
uint64_t squash_mount_id(int fd, char *why, size_t len);

/* fd's mount by its unique id (statx STATX_MNT_ID_UNIQUE, Linux 6.8 on:
 * never given to another mount, unlike squash_mount_id's), or 0 when the
 * kernel has none. */
uint64_t squash_mount_unique_id(int fd);

/* Whether mount mnt_id of t is judged by itself alone: in t, and neither
 * stacked on directories (an overlay's layers, which later mounts over
 * their paths would change) nor unknown; its verdict then holds for the
 * mount's whole life. */
bool squash_mount_is_plain(const struct squash_mount_table *t, uint64_t mnt_id);

/* fd: any descriptor of the file (O_PATH will do). True when squashd must
 * not open it; why then gets the reason, worded to follow "image X "
 * ("is on a FUSE file system that uid N mounted; ..."). */
bool squash_user_fuse_refuses(int fd, char *why, size_t len);

/* The same decision for mount mnt_id of table t (the unit tests' entry);
 * any_fuse: every FUSE mount counts, root's with allow_other too. */
bool squash_user_fuse_judge(const struct squash_mount_table *t, uint64_t mnt_id, bool any_fuse, char *why,
			    size_t len);

/* The decision with its kind: refused because it is (or stacks on) such a
 * FUSE mount, or is not in t (another namespace); or refused because it
 * cannot be told (layers not visible here, a FUSE mount without one
 * user_id, too deep), which a walk lets through where it only passes
 * (user_fuse_walk.h). why is set unless SQUASH_FUSE_OK. */
enum { SQUASH_FUSE_OK = 0, SQUASH_FUSE_REFUSED = 1, SQUASH_FUSE_UNKNOWN = 2 };
int squash_user_fuse_verdict(const struct squash_mount_table *t, uint64_t mnt_id, bool any_fuse, char *why,
			     size_t len);

/* For squashd's trusted walk, which enters no FUSE mount: whether mount
 * mnt_id of /proc/self/mountinfo is FUSE, any kind, or stacks on one, or
 * is not listed, or cannot be told; why then says so ("is on ..."). */
bool squash_mount_reaches_fuse(uint64_t mnt_id, char *why, size_t len);

/* fuse, fuseblk and fuse.SUBTYPE. */
bool squash_fstype_is_fuse(const char *fstype);

/* The same for a path (opened O_PATH, not followed further than open
 * does): true with the reason in buf. */
bool squash_user_fuse_path(const char *path, char *buf, size_t len);

#endif

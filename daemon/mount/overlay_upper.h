/* A writable overlay whose changes are kept in a directory the user named
 * (IMAGE:TARGET:rw=DIR). DIR, DIR/upper and DIR/work are opened and
 * created by a child that has become the job user with no capability at
 * all; a second child, the job user keeping only CAP_SYS_ADMIN and
 * CAP_DAC_OVERRIDE (overlay_upper.c says why), mounts the overlay from
 * those descriptors and root's, resolving no name the user chose, so
 * overlayfs records the user (not root) as its mounter and does all its
 * later work in DIR (copy-up, whiteouts, renames) with the user's rights.
 * A user-controlled tree is never written with root's. */
#ifndef SQUASHD_OVERLAY_UPPER_H
#define SQUASHD_OVERLAY_UPPER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "process/identity.h"
#include "util/result.h"

/* The least time a mount of overlay_mount_named_upper is given. */
#define OVERLAY_MOUNT_MIN_MS 1000

/* Mounts an overlay on point (a directory in squashd's private mount
 * directory) with lower as its lower layer and DIR/upper, DIR/work as its
 * upper and work directories. DIR must be a directory the user owns
 * (not a symbolic link); upper/ and work/ are created when missing. Gives
 * up after timeout_ms (a hung file system). User errors (DIR missing, not
 * the user's, a file system overlayfs cannot write to) name DIR.
 * *mount_timed_out: the mount itself did not return in time (given at
 * least OVERLAY_MOUNT_MIN_MS); it waits on lower's server or on DIR's
 * file system (never a user's FUSE mount), and when lower's server is
 * the one that does not answer, the caller ends it, or the child
 * abandoned here stays blocked in the kernel for good. */
enum result overlay_mount_named_upper(const char *dir, const struct identity *id,
				      const char *lower, const char *point, int timeout_ms,
				      bool *mount_timed_out, char *err, size_t errlen);

/* The owner and mode of the root of lower (an image's mount: for a user's
 * image their reader's FUSE mount), asked by a child that has become the
 * user without capabilities, so root never asks a user's reader anything
 * and a stopped reader costs only this request its timeout. The mode
 * never carries set-uid or set-gid bits. *timed_out: the child did not
 * answer in time (it waits on lower's server, which the caller ends). */
enum result overlay_lower_root(const char *lower, const struct identity *id, int timeout_ms,
			       uid_t *uid, gid_t *gid, mode_t *mode, bool *timed_out, char *err,
			       size_t errlen);

/* Whether lower's server stays silent: a child that has become the user
 * without capabilities asks it for STATFS (never answered from the
 * kernel's caches) and gets no answer within timeout_ms (a second at
 * least). That child waits on the server until it answers or dies. */
bool overlay_lower_silent(const char *lower, const struct identity *id, int timeout_ms);

#endif

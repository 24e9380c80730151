/* Tearing down one node-level mount: umount with bounded retries on EBUSY,
 * then a lazy detach; for FUSE, wait (bounded, woken by its exit) for the server to exit and
 * kill it if it does not. Never blocks longer than timeout_ms in total. */
#ifndef SQUASHD_UNMOUNT_H
#define SQUASHD_UNMOUNT_H

#include <stddef.h>
#include <sys/types.h>

#include "util/result.h"

/* server_pid: the FUSE server to wait for, 0 for kernel mounts;
 * server_pidfd: a pidfd for it, or -1 (one is made); server_uid: its
 * user (a process not running as that user alone, or not a FUSE server
 * binary, is never signalled: reader_process.h); conn_fd: a descriptor of
 * the mount's FUSE connection (mount/fuse_keep.h), or -1: a connection
 * that outlives a clean unmount is mounted elsewhere still, and its
 * server is killed without waiting for it to exit. Returns
 * RESULT_OK once the mount point is no longer mounted (the directory is
 * then removed), RESULT_NODE_ERROR with err otherwise. Unmounting a path
 * that is not mounted is success (idempotent). */
enum result unmount_image(const char *mountpoint, pid_t server_pid, int server_pidfd,
			  uid_t server_uid, int conn_fd, int timeout_ms, char *err, size_t errlen);

/* True when path is a mount point in this mount namespace: the root of a
 * mount (statx, asking no file system; mountinfo before Linux 5.8). */
int is_mount_point(const char *path);

/* The mount points of squashd's namespace, read once: a check per mount
 * of a long registry (adoption) then costs a lookup, not a read of the
 * whole mountinfo, which other users' binds make long. */
struct mount_points {
	char **paths; /* sorted */
	size_t n;
};

/* Reads them; 0, or -1 (nothing held) when mountinfo cannot be read. */
int mount_points_read(struct mount_points *mp);
/* 1 if path is one of them (a trailing slash ignored), else 0. */
int mount_points_has(const struct mount_points *mp, const char *path);
void mount_points_free(struct mount_points *mp);

#endif

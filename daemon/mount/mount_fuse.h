/* FUSE mounts: root opens /dev/fuse and mounts it (ro, nosuid, nodev,
 * allow_other, default_permissions) at mountpoint, then starts squashfuse_ll
 * as the job user, handing it the image and /dev/fuse descriptors
 * (/dev/fd/N paths), so the server never runs as root and never opens the
 * image path. */
#ifndef SQUASHD_MOUNT_FUSE_H
#define SQUASHD_MOUNT_FUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "process/identity.h"
#include "util/result.h"

/* Mounts the image open on image_fd at mountpoint (an existing empty
 * directory). Waits until the file system answers (bounded by timeout_ms).
 * On RESULT_OK stores the server's pid (a child of squashd, in its own
 * session) and a pidfd for it (the caller owns it). On failure nothing is
 * left mounted and no server is running. */
enum result fuse_mount_image(int image_fd, const char *mountpoint,
			     const struct identity *id,
			     const char *squashfuse_path, int timeout_ms,
			     pid_t *server_pid, int *server_pidfd, char *err,
			     size_t errlen);

/* The same, with pooled (squash-reader) served by the user's one reader
 * (reader_pool.h) instead of a server of its own, and keeping the FUSE
 * connection: on RESULT_OK *conn_fd is a
 * descriptor of it for the caller. The kernel keeps a connection whose
 * server died alive while a descriptor of it is open, so a new server can
 * take over (fuse_restart_server); the caller must close it once it gives
 * up on the mount, or callers hang instead of getting ENOTCONN. */
enum result fuse_mount_image_kept(int image_fd, const char *mountpoint,
				  const struct identity *id,
				  const char *squashfuse_path, bool pooled, int timeout_ms,
				  pid_t *server_pid, int *server_pidfd, int *conn_fd,
				  char *err, size_t errlen);

/* Whether the kernel can resend the requests a dead server left
 * unanswered (FUSE_NOTIFY_RESEND, Linux 6.9). */
bool fuse_kernel_resends(void);

/* The same for a union of n images (image_fds, bottom first; n >= 2)
 * served as one mount by id's squash-reader (reader_pool_serve_union). */
enum result fuse_mount_union_kept(const int *image_fds, size_t n, const char *mountpoint,
				  const struct identity *id, const char *reader_path,
				  int timeout_ms, pid_t *server_pid, int *server_pidfd,
				  int *conn_fd, char *err, size_t errlen);

/* Hands the kept connection conn_fd and the image (n 1), or the union's n
 * images, to id's squash-reader (reader_pool.h; started when there is
 * none): it takes the connection over and has the kernel resend what the
 * dead server left unanswered. Does not wait. */
enum result fuse_restart_server(int conn_fd, const int *image_fds, size_t n,
				const struct identity *id, const char *reader_path,
				pid_t *server_pid, int *server_pidfd, char *err, size_t errlen);

#endif

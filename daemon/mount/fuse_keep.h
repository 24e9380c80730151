/* Kept FUSE connections: for mounts served by squash-reader on a kernel
 * that can resend requests (Linux 6.9+), squashd keeps a descriptor of the
 * FUSE connection and of the image, and the owner's identity, so that when
 * the reader dies (OOM killer, a bug) a new one takes the connection over
 * and the kernel resends what was in flight: a running job sees a pause,
 * not ENOTCONN. Restarts are limited (FUSE_KEEP_RESTARTS within
 * FUSE_KEEP_WINDOW_MS); past that the mount is given up as before. */
#ifndef SQUASHD_FUSE_KEEP_H
#define SQUASHD_FUSE_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "process/identity.h"
#include "util/result.h"

#define FUSE_KEEP_RESTARTS 3
#define FUSE_KEEP_WINDOW_MS 60000

struct fuse_keep {
	int conn_fd;
	int *image_fds;  /* the image, or a union's images (bottom first) */
	size_t n_images;
	struct identity owner;
	unsigned restarts;          /* within the current window */
	long long window_start_ms;
	unsigned long total_restarts;
};

/* Takes conn_fd; duplicates the n image_fds (one image, or a union's).
 * NULL (conn_fd closed) on failure. */
struct fuse_keep *fuse_keep_new(int conn_fd, const int *image_fds, size_t n,
				const struct identity *owner);

/* Closes its descriptors: a connection whose server is gone is aborted
 * by the kernel once its last descriptor closes. NULL is fine. */
void fuse_keep_free(struct fuse_keep *k);

/* Whether k's budget allows another restart at now_ms (monotonic). */
bool fuse_keep_may_restart(const struct fuse_keep *k, long long now_ms);

/* Starts a new reader on the kept connection unless the budget is spent
 * (then RESULT_NODE_ERROR and err says so). */
enum result fuse_keep_restart(struct fuse_keep *k, const char *reader_path, pid_t *pid, int *pidfd,
			      char *err, size_t errlen);

#endif

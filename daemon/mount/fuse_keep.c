#include "config.h"

#include "mount/fuse_keep.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "mount/mount_fuse.h"
#include "util/close_detached.h"

struct fuse_keep *fuse_keep_new(int conn_fd, int image_fd, const struct identity *owner)
{
	struct fuse_keep *k = malloc(sizeof(*k));

	if (!k) {
		close(conn_fd);
		return NULL;
	}
	k->conn_fd = conn_fd;
	k->image_fd = fcntl(image_fd, F_DUPFD_CLOEXEC, 0);
	if (k->image_fd < 0) {
		close(conn_fd);
		free(k);
		return NULL;
	}
	k->owner = *owner;
	k->restarts = 0;
	k->window_start_ms = 0;
	k->total_restarts = 0;
	return k;
}

void fuse_keep_free(struct fuse_keep *k)
{
	if (!k)
		return;
	close(k->conn_fd); /* /dev/fuse: no flush */
	/* The user's image may lie on a FUSE mount of theirs, and this runs
	 * under squashd's lock (a mount marked dead). */
	close_detached(k->image_fd);
	free(k);
}

enum result fuse_keep_restart(struct fuse_keep *k, const char *reader_path, pid_t *pid, int *pidfd,
			      char *err, size_t errlen)
{
	long long now = squash_now_ms();
	enum result r;

	if (now - k->window_start_ms > FUSE_KEEP_WINDOW_MS) {
		k->window_start_ms = now;
		k->restarts = 0;
	}
	/* A reader that keeps dying would otherwise be restarted for ever. */
	if (k->restarts >= FUSE_KEEP_RESTARTS) {
		snprintf(err, errlen, "it died %u times within %d s; not restarted again",
			 k->restarts + 1, FUSE_KEEP_WINDOW_MS / 1000);
		return RESULT_NODE_ERROR;
	}
	r = fuse_restart_server(k->conn_fd, k->image_fd, &k->owner, reader_path, pid, pidfd, err,
				errlen);
	if (r == RESULT_OK) {
		k->restarts++;
		k->total_restarts++;
	}
	return r;
}

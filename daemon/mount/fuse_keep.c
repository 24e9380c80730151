#include "config.h"

#include "mount/fuse_keep.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "mount/mount_fuse.h"
#include "util/close_detached.h"

/* The images' descriptors of k: the user's image may lie on a FUSE mount
 * of theirs, and this may run under squashd's lock (a mount marked
 * dead). */
static void close_images(struct fuse_keep *k)
{
	for (size_t i = 0; i < k->n_images; i++)
		close_detached(k->owner.uid, k->image_fds[i]);
	free(k->image_fds);
}

struct fuse_keep *fuse_keep_new(int conn_fd, const int *image_fds, size_t n,
				const struct identity *owner)
{
	struct fuse_keep *k = calloc(1, sizeof(*k));

	if (k && n > 0)
		k->image_fds = malloc(n * sizeof(*k->image_fds));
	for (; k && k->image_fds && k->n_images < n; k->n_images++) {
		k->image_fds[k->n_images] = fcntl(image_fds[k->n_images], F_DUPFD_CLOEXEC, 0);
		if (k->image_fds[k->n_images] < 0)
			break;
	}
	if (!k || k->n_images < n || n == 0) {
		if (k)
			close_images(k);
		free(k);
		close(conn_fd);
		return NULL;
	}
	k->conn_fd = conn_fd;
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
	close_images(k);
	free(k);
}

bool fuse_keep_may_restart(const struct fuse_keep *k, long long now_ms)
{
	/* A reader that keeps dying would otherwise be restarted for ever. */
	return now_ms - k->window_start_ms > FUSE_KEEP_WINDOW_MS || k->restarts < FUSE_KEEP_RESTARTS;
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
	if (!fuse_keep_may_restart(k, now)) {
		snprintf(err, errlen, "it died %u times within %d s; not restarted again",
			 k->restarts + 1, FUSE_KEEP_WINDOW_MS / 1000);
		return RESULT_NODE_ERROR;
	}
	r = fuse_restart_server(k->conn_fd, k->image_fds, k->n_images, &k->owner, reader_path, pid,
				pidfd, err, errlen);
	if (r == RESULT_OK) {
		k->restarts++;
		k->total_restarts++;
	}
	return r;
}

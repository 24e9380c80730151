/* squash-reader --serve: one process serving all of one user's mounts on
 * a node (serve.h). */
#include "config.h"

#include "reader/serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader_wire.h"
#include "reader/session.h"

/* One mount: its own image, session and worker threads. */
struct served_mount {
	struct reader rd;
	int image_fd;
	int fuse_fd;               /* until the session takes it (-1 then) */
	struct session *session;
};

/* Lets go of whatever of sm is set up; NULL is fine. */
static void served_mount_free(struct served_mount *sm)
{
	if (!sm)
		return;
	if (sm->session)
		session_close(sm->session);
	if (sm->rd.img)
		image_close(sm->rd.img);
	if (sm->fuse_fd >= 0)
		close(sm->fuse_fd);
	close(sm->image_fd);
	free(sm);
}

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_changed = PTHREAD_COND_INITIALIZER;
static unsigned live_mounts;

static void *serve_mount(void *arg)
{
	struct served_mount *sm = arg;

	/* Returns once the mount is gone: unmounting aborts the connection. */
	session_serve(sm->session);
	served_mount_free(sm);
	pthread_mutex_lock(&live_lock);
	live_mounts--;
	pthread_cond_broadcast(&live_changed);
	pthread_mutex_unlock(&live_lock);
	return NULL;
}

/* Answers a request squashd waits for. A take-over (SERVE_RESUME) is not
 * answered: squashd sends those for a dead reader's mounts, all at once and
 * without waiting (answers nobody reads would fill the socket), and one
 * that fails ends this reader, so that squashd's watch of it hands the
 * mounts to a new one, as when a reader of its own failed to start. */
static void reply(int sock, const struct serve_request *req, int error, const char *message)
{
	struct serve_reply r = { .magic = SERVE_WIRE_MAGIC, .id = req->id, .error = error };

	if (req->flags & SERVE_RESUME) {
		if (error == 0)
			return;
		fprintf(stderr, "squash-reader: cannot take a connection over: %s\n",
			message ? message : strerror(error));
		exit(1);
	}

	if (message)
		snprintf(r.message, sizeof(r.message), "%s", message);
	/* squashd may have gone (restarted): never die of SIGPIPE for it. */
	if (send(sock, &r, sizeof(r), MSG_NOSIGNAL) < 0 && errno != EPIPE)
		fprintf(stderr, "squash-reader: cannot answer squashd: %s\n", strerror(errno));
}

/* Starts serving one mount; the descriptors are its own from here on. */
static void start_mount(int sock, const struct serve_request *req, int image_fd, int fuse_fd,
			const struct session_options *base)
{
	struct served_mount *sm = calloc(1, sizeof(*sm));
	struct session_options opt = *base;
	char err[256], fuse_path[32];
	const char *why = err;
	struct inode root;
	pthread_attr_t attr;
	pthread_t t;
	int r = EIO;

	if (!sm) {
		close(image_fd);
		close(fuse_fd);
		reply(sock, req, ENOMEM, "out of memory");
		return;
	}
	sm->image_fd = image_fd;
	sm->fuse_fd = fuse_fd;
	pthread_mutex_lock(&live_lock);
	bool full = live_mounts >= SERVE_MOUNTS_REFUSE;
	pthread_mutex_unlock(&live_lock);
	if (full) {
		/* libfuse would fail to make the session's thread key, or take
		 * the last ones (reader_wire.h). */
		snprintf(err, sizeof(err), "this reader serves %u mounts, the most one process can",
			 SERVE_MOUNTS_REFUSE);
		r = EMFILE;
		goto fail;
	}
	if (image_open(image_fd, 0, 0, &sm->rd.img, err, sizeof(err)) < 0)
		goto fail;
	/* What squashd would otherwise ask over the mount before using it:
	 * the root directory reads. Answering only now spares it that. */
	if (inode_get(sm->rd.img, image_root(sm->rd.img), &root) < 0 || !S_ISDIR(root.mode)) {
		why = "cannot read the image's root directory (damaged image?)";
		goto fail;
	}
	/* And its first entry: a metadata block through the decompressor
	 * (the root inode's block is often stored uncompressed), so that a
	 * reader that cannot decompress says so here, to squashd and the job,
	 * instead of answering EIO to every request of a mount squashd
	 * merged and handed out. */
	struct dir_iter it;
	struct dir_entry first;
	int d = dir_open(sm->rd.img, &root, 0, &it);

	if (d == 0)
		d = dir_next(sm->rd.img, &it, &first);
	if (d < 0) {
		snprintf(err, sizeof(err), "cannot list the image's root directory: %s%s",
			 strerror(-d), d == -EIO ? " (damaged image, or its compression unreadable here)" : "");
		goto fail;
	}
	snprintf(fuse_path, sizeof(fuse_path), "/dev/fd/%d", fuse_fd);
	opt.mountpoint = fuse_path;
	opt.resume = req->flags & SERVE_RESUME;
	opt.own_signals = false;
	sm->session = session_open(&sm->rd, &opt);
	if (!sm->session) {
		why = "cannot start a FUSE session";
		goto fail;
	}
	sm->fuse_fd = -1; /* the session's now (closed by session_close) */

	pthread_mutex_lock(&live_lock);
	live_mounts++;
	pthread_mutex_unlock(&live_lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &attr, serve_mount, sm);
	pthread_attr_destroy(&attr);
	if (r == 0) {
		reply(sock, req, 0, NULL);
		return;
	}
	pthread_mutex_lock(&live_lock);
	live_mounts--;
	pthread_mutex_unlock(&live_lock);
	/* EAGAIN: most likely the pids limit of the user's reader cgroup
	 * (squashd's reader_tasks_max; each mount holds 3 threads at rest). */
	snprintf(err, sizeof(err), "cannot start a thread: %s%s", strerror(r),
		 r == EAGAIN ? " (the user's FUSE readers at squashd's reader_tasks_max?)" : "");
	why = err;
fail:
	served_mount_free(sm);
	reply(sock, req, r, why);
}

/* Receives one request; returns 1 with both descriptors, 0 at the end of
 * the socket, -1 for a message to ignore (its descriptors closed). */
static int receive(int sock, struct serve_request *req, int *image_fd, int *fuse_fd)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = req, .iov_len = sizeof(*req) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	int fds[4], nfds = 0;
	ssize_t k;

	do
		k = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (k < 0 && errno == EINTR);
	if (k <= 0)
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n && nfds < 4; i++)
			memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if ((size_t)k != sizeof(*req) || req->magic != SERVE_WIRE_MAGIC || nfds != 2 ||
	    (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return -1;
	}
	*image_fd = fds[0];
	*fuse_fd = fds[1];
	return 1;
}

int serve_run(int sock, const struct session_options *base)
{
	struct serve_request req;
	int image_fd, fuse_fd, r;

	while ((r = receive(sock, &req, &image_fd, &fuse_fd)) != 0)
		if (r > 0)
			start_mount(sock, &req, image_fd, fuse_fd, base);
	/* squashd let go of this reader: no more mounts come; those it
	 * serves go on until they are unmounted. */
	close(sock);
	pthread_mutex_lock(&live_lock);
	while (live_mounts > 0)
		pthread_cond_wait(&live_changed, &live_lock);
	pthread_mutex_unlock(&live_lock);
	return 0;
}

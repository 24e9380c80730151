/* squash-reader --serve: one process serving all of one user's mounts on
 * a node (serve.h). */
#include "config.h"

#include "reader/serve.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader_wire.h"
#include "reader/serve_pool.h"
#include "reader/session.h"
#include "reader/start_profile.h"
#include "reader/union_tree.h"

/* Workers kept at rest for all of the reader's mounts (serve_pool.h). */
#define IDLE_THREADS 2

/* One mount: its own image and session; the pool's threads serve it. */
struct served_mount {
	struct reader rd;
	int image_fd;
	int fuse_fd;               /* until the session takes it (-1 then) */
	struct session *session;
	uint32_t id;               /* squashd's, of the request that made it */
	struct served_mount *next; /* in live, under live_lock */
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
	if (sm->rd.layer_fds)
		reader_union_close(&sm->rd); /* closes the images too */
	if (sm->fuse_fd >= 0)
		close(sm->fuse_fd);
	if (sm->image_fd >= 0)
		close(sm->image_fd);
	free(sm);
}

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_changed = PTHREAD_COND_INITIALIZER;
static unsigned live_mounts;
static struct served_mount *live; /* the single images' mounts served */
static struct serve_pool *pool;

/* Under live_lock. */
static void unlink_live(struct served_mount *sm)
{
	for (struct served_mount **p = &live; *p; p = &(*p)->next)
		if (*p == sm) {
			*p = sm->next;
			return;
		}
}

/* The pool is done with a mount: it is gone (unmounting aborts the
 * connection). */
static void mount_ended(void *arg)
{
	pthread_mutex_lock(&live_lock);
	unlink_live(arg);
	pthread_mutex_unlock(&live_lock);
	served_mount_free(arg);
	pthread_mutex_lock(&live_lock);
	live_mounts--;
	pthread_cond_broadcast(&live_changed);
	pthread_mutex_unlock(&live_lock);
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

/* Stops at the first entry: the union's root directory lists. */
static int first_entry(void *ctx, const struct tree_dirent *e)
{
	*(bool *)ctx = true;
	return 1;
}

/* Starts serving one mount: of the image on image_fd, or (image_fd -1)
 * of the union of the n images on layer_fds (malloc'd). The descriptors
 * are its own from here on. */
static void start_mount(int sock, const struct serve_request *req, int image_fd, int *layer_fds,
			unsigned n, int fuse_fd, const struct session_options *base)
{
	struct served_mount *sm = calloc(1, sizeof(*sm));
	struct session_options opt = *base;
	char err[256], fuse_path[32];
	const char *why = err;
	struct inode root;
	int r = EIO;

	if (!sm) {
		if (image_fd >= 0)
			close(image_fd);
		for (unsigned i = 0; layer_fds && i < n; i++)
			close(layer_fds[i]);
		free(layer_fds);
		close(fuse_fd);
		reply(sock, req, ENOMEM, "out of memory");
		return;
	}
	sm->image_fd = image_fd;
	sm->fuse_fd = fuse_fd;
	if (layer_fds) {
		/* The union's now, whatever happens (reader_union_close). */
		sm->rd.layer_fds = layer_fds;
		sm->rd.nlayers = n;
	}
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
	if (layer_fds) {
		bool listed = false;
		struct tree_node top;
		int d;

		if (reader_union_open(&sm->rd, layer_fds, n, err, sizeof(err)) < 0)
			goto fail;
		/* Its root directory merged now (every layer's root listed
		 * through its decompressor), for the reasons below. */
		d = union_node_get(sm->rd.u, FUSE_ROOT_ID, &top);
		if (d == 0)
			d = union_readdir(sm->rd.u, &top, 0, TREE_PLUS_NONE, first_entry, &listed);
		if (d < 0) {
			snprintf(err, sizeof(err), "cannot list the union's root directory: %s%s",
				 strerror(-d), d == -EIO ? " (a damaged image, or its compression unreadable here)" : "");
			goto fail;
		}
		goto session;
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
session:
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

	sm->id = req->id;
	pthread_mutex_lock(&live_lock);
	live_mounts++;
	if (sm->rd.img) {
		sm->next = live;
		live = sm;
	}
	pthread_mutex_unlock(&live_lock);
	r = serve_pool_add(pool, session_fuse(sm->session), mount_ended, sm);
	if (r == 0) {
		reply(sock, req, 0, NULL);
		return;
	}
	pthread_mutex_lock(&live_lock);
	unlink_live(sm);
	live_mounts--;
	pthread_mutex_unlock(&live_lock);
	/* EAGAIN: the reader's first worker could not start, most likely at
	 * the pids limit of the user's reader cgroup (squashd's
	 * reader_tasks_max). */
	snprintf(err, sizeof(err), "cannot serve the mount: %s%s", strerror(r),
		 r == EAGAIN ? " (the user's FUSE readers at squashd's reader_tasks_max?)" : "");
	why = err;
fail:
	served_mount_free(sm);
	reply(sock, req, r, why);
}

/* A union whose parts are still coming (reader_wire.h). */
struct pending_union {
	bool used;
	uint32_t id, flags, images, got;
	int *fds;
};

static struct pending_union pending[SERVE_UNION_PENDING];

static void pending_drop(struct pending_union *p)
{
	for (uint32_t i = 0; i < p->got; i++)
		close(p->fds[i]);
	free(p->fds);
	memset(p, 0, sizeof(*p));
}

static void close_all(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* One part of a union; starts the mount after the last. Everything in a
 * part is checked: the union's size, the order of parts, the count of
 * descriptors. */
static void union_part(int sock, const struct serve_union_part *part, const int *fds, int nfds,
		       const struct session_options *base)
{
	struct serve_request req = { .magic = part->magic, .id = part->id, .flags = part->flags };
	struct pending_union *p = NULL, *free_slot = NULL;
	const char *why = NULL;
	uint32_t take;

	for (unsigned i = 0; i < SERVE_UNION_PENDING; i++) {
		if (pending[i].used && pending[i].id == part->id)
			p = &pending[i];
		else if (!pending[i].used && !free_slot)
			free_slot = &pending[i];
	}
	if (part->images == 0 || part->images > SERVE_UNION_MAX) {
		why = "a union of no images, or of more than a reader takes";
		goto bad;
	}
	if (!p) {
		if (part->first != 0) {
			why = "a part of a union whose start never came";
			goto bad;
		}
		if (!free_slot) {
			why = "too many unions under way at once";
			goto bad;
		}
		p = free_slot;
		p->fds = malloc(part->images * sizeof(int));
		if (!p->fds) {
			why = "out of memory";
			goto bad;
		}
		p->used = true;
		p->id = part->id;
		p->flags = part->flags;
		p->images = part->images;
	}
	if (part->first != p->got || part->images != p->images || part->flags != p->flags) {
		why = "the parts of a union out of order";
		goto bad_pending;
	}
	take = p->images - p->got < SERVE_UNION_PART ? p->images - p->got : SERVE_UNION_PART;
	/* The last part carries the /dev/fuse descriptor after its images. */
	if ((uint32_t)nfds != take + (p->got + take == p->images)) {
		why = "a part of a union with the wrong number of descriptors";
		goto bad_pending;
	}
	memcpy(p->fds + p->got, fds, take * sizeof(int));
	p->got += take;
	if (p->got < p->images)
		return;
	int *layer_fds = p->fds;
	uint32_t n = p->images;

	memset(p, 0, sizeof(*p)); /* the mount's now */
	start_mount(sock, &req, -1, layer_fds, n, fds[nfds - 1], base);
	return;
bad_pending:
	pending_drop(p);
bad:
	close_all(fds, nfds);
	reply(sock, &req, EINVAL, why);
}

/* SERVE_ROOT: the root of mount id, to walk its image's start profile
 * through (start_profile.h). Takes root_fd. */
static void walk_profile(uint32_t id, int root_fd)
{
	struct served_mount *sm;

	pthread_mutex_lock(&live_lock);
	for (sm = live; sm && sm->id != id; sm = sm->next)
		;
	/* Under the lock: the mount cannot end (and its image close) meanwhile. */
	if (sm)
		start_profile_walk_begin(sm->rd.img, root_fd);
	else
		close(root_fd);
	pthread_mutex_unlock(&live_lock);
}

/* Receives one message and acts on it; returns 0 at the end of the
 * socket. A message that is neither a request nor a union's part is
 * ignored (its descriptors closed). */
static int receive_one(int sock, const struct session_options *base)
{
	union {
		char buf[CMSG_SPACE((SERVE_UNION_PART + 1) * sizeof(int))];
		struct cmsghdr align;
	} control;
	union {
		struct serve_request req;
		struct serve_union_part part;
	} m;
	struct iovec iov = { .iov_base = &m, .iov_len = sizeof(m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	int fds[SERVE_UNION_PART + 1], nfds = 0;
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
		for (size_t i = 0; i < n && nfds < (int)(SERVE_UNION_PART + 1); i++)
			memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (m.req.magic != SERVE_WIRE_MAGIC || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		close_all(fds, nfds);
		return 1;
	}
	if ((size_t)k == sizeof(m.part) && (m.part.flags & SERVE_UNION)) {
		union_part(sock, &m.part, fds, nfds, base);
		return 1;
	}
	if ((size_t)k == sizeof(m.req) && (m.req.flags & SERVE_ROOT) && nfds == 1) {
		walk_profile(m.req.id, fds[0]);
		return 1;
	}
	if ((size_t)k != sizeof(m.req) || (m.req.flags & (SERVE_UNION | SERVE_ROOT)) || nfds != 2) {
		close_all(fds, nfds);
		return 1;
	}
	start_mount(sock, &m.req, fds[0], NULL, 0, fds[1], base);
	return 1;
}

/* A union holds a descriptor per image for as long as it is mounted:
 * 1,024 images are past the usual soft limit of descriptors. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The workers of all mounts at most, unless -t says: twice the CPUs this
 * reader may run on, within 8..64. Decompressing is CPU work, reading the
 * image may wait on a parallel file system; 8 is what one mount had to
 * itself before the mounts shared them (docs/architecture.md). */
static unsigned default_threads(void)
{
	cpu_set_t set;
	unsigned n = 8;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = 2 * (unsigned)CPU_COUNT(&set);
	return n < 8 ? 8 : n > 64 ? 64 : n;
}

int serve_run(int sock, const struct session_options *base)
{
	pool = serve_pool_new(base->max_threads ? base->max_threads : default_threads(),
			      IDLE_THREADS, base->poll_us);
	if (!pool) {
		fprintf(stderr, "squash-reader: cannot set up the worker threads: %s\n",
			strerror(errno));
		return 1;
	}
	raise_nofile();
	while (receive_one(sock, base) != 0)
		;
	for (unsigned i = 0; i < SERVE_UNION_PENDING; i++)
		if (pending[i].used)
			pending_drop(&pending[i]);
	/* squashd let go of this reader: no more mounts come; those it
	 * serves go on until they are unmounted. */
	close(sock);
	pthread_mutex_lock(&live_lock);
	while (live_mounts > 0)
		pthread_cond_wait(&live_changed, &live_lock);
	pthread_mutex_unlock(&live_lock);
	serve_pool_free(pool);
	return 0;
}

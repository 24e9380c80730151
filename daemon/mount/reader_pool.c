/* One squash-reader per user and node (reader_pool.h). */
#include "config.h"

#include "mount/reader_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "mount/reader_args.h"
#include "passed_fds.h"
#include "process/child_process.h"
#include "process/server_spawn.h"
#include "reader_wire.h"
#include "util/close_detached.h"
#include "util/log.h"

/* squashd's socket buffer to each reader: SERVE_MOUNTS_MAX mounts, each a
 * request or a union's parts, resent at a restart (the kernel doubles it). */
#define RESTART_SNDBUF (2 << 20)

struct pool {
	uid_t uid;
	char *path;            /* the reader binary (settings may change it) */
	pid_t pid;
	int pidfd;
	int sock;              /* -1: adopted (the previous squashd's reader) */
	bool retired;          /* takes no new mounts; its socket is shut down */
	unsigned mounts;       /* served now, or being handed over */
	unsigned users;        /* threads using the entry outside pools_lock */
	uint32_t next_id;
	pthread_mutex_t io;    /* one awaited answer at a time (each request is
				* one datagram: sending needs no lock) */
	struct pool *next;
};

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool *pools;

static void pool_free(struct pool *p)
{
	/* Detached: before Linux 6.16 datagrams the reader sent and squashd
	 * never read may carry descriptors, whose last close can wait (a file
	 * of a stopped FUSE server); the caller holds pools_lock. */
	if (p->sock >= 0)
		close_detached(p->sock);
	if (p->pidfd >= 0)
		close(p->pidfd);
	pthread_mutex_destroy(&p->io);
	free(p->path);
	free(p);
}

static void unlink_locked(struct pool *p)
{
	for (struct pool **pp = &pools; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			return;
		}
}

/* Drops a thread's use of p; frees it once it is out of the list and
 * unused (pools_lock held). */
static void unuse_locked(struct pool *p, bool listed)
{
	p->users--;
	if (!listed && p->users == 0)
		pool_free(p);
}

static bool listed_locked(const struct pool *p)
{
	for (const struct pool *q = pools; q; q = q->next)
		if (q == p)
			return true;
	return false;
}

static struct pool *find_pid_locked(pid_t pid)
{
	for (struct pool *p = pools; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

/* Starts id's reader (pools_lock held: a burst of one user's first mounts
 * starts one reader, not one each). That waits only for the spawner's
 * pidfd message, never for the reader (process/server_spawn.h): nothing
 * the user does to the starting reader holds the lock. */
static struct pool *start_locked(const struct identity *id, const char *reader_path, char *err,
				 size_t errlen)
{
	struct reader_args args;
	struct pool *p = calloc(1, sizeof(*p));
	int sv[2];

	if (!p || !(p->path = strdup(reader_path))) {
		free(p);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		free(p->path);
		free(p);
		return NULL;
	}
	/* The reader runs as the user, who may make it send anything: its
	 * answers never carry descriptors, and one it passed would be
	 * closed (maybe waited for) by the thread reading the answer, or
	 * under pools_lock when the socket goes (passed_fds.h). Before
	 * 6.16 the kernel cannot refuse them (main.c warns at start). */
	(void)squash_refuse_passed_fds(sv[0]);
	/* A restart hands every mount the dead reader served to this one at
	 * once, without waiting (the registry lock is held): up to
	 * SERVE_MOUNTS_MAX requests, a union's in parts, each about 1 KiB of
	 * socket memory while unread. The default buffer took 278. */
	int sndbuf = RESTART_SNDBUF;
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
		log_warning("cannot size the socket to squash-reader for restarts (SO_SNDBUFFORCE): %s",
			    strerror(errno));
	reader_args_fill(&args);
	p->pid = server_spawn(sv[1], -1, id, reader_path, args.argv, &p->pidfd);
	close(sv[1]);
	if (p->pid < 0) {
		snprintf(err, errlen, "cannot start %s: %s", reader_path, strerror(errno));
		close(sv[0]);
		free(p->path);
		free(p);
		return NULL;
	}
	p->uid = id->uid;
	p->sock = sv[0];
	pthread_mutex_init(&p->io, NULL);
	p->next = pools;
	pools = p;
	log_info("started %s pid %d for the FUSE mounts of user %s (uid %u)", reader_path,
		 (int)p->pid, id->name, (unsigned)id->uid);
	return p;
}

/* One serve_request of flags with the n descriptors fds. */
static int send_request(int sock, uint32_t id, uint32_t flags, const int *fds, size_t n)
{
	struct serve_request req = { .magic = SERVE_WIRE_MAGIC, .id = id, .flags = flags };
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = &req, .iov_len = sizeof(req) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	ssize_t k;

	if (n == 0 || n > 2)
		return -1;
	memset(&control, 0, sizeof(control));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	/* Never blocks: a reader that stopped reading is not waited for. */
	do
		k = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	return k == (ssize_t)sizeof(req) ? 0 : -1;
}

/* How long a reader may stay silent before squashd kills it. */
#define SILENT_READER_MS 1000

/* Sends a union of n images (reader_wire.h: parts of SERVE_UNION_PART
 * image descriptors, the last with fuse_fd after its images). A part the
 * socket cannot take now waits for room until deadline_ms: a union of
 * 1,024 images is 5 messages carrying 1,025 descriptors. */
static int send_union(int sock, uint32_t id, bool resume, const int *image_fds, size_t n,
		      int fuse_fd, long long deadline_ms)
{
	union {
		char buf[CMSG_SPACE((SERVE_UNION_PART + 1) * sizeof(int))];
		struct cmsghdr align;
	} control;
	int fds[SERVE_UNION_PART + 1];

	if (n == 0 || n > SERVE_UNION_MAX) {
		errno = EINVAL;
		return -1;
	}
	for (size_t first = 0; first < n; first += SERVE_UNION_PART) {
		size_t take = n - first < SERVE_UNION_PART ? n - first : SERVE_UNION_PART;
		size_t nfds = take + (first + take == n);
		struct serve_union_part part = { .magic = SERVE_WIRE_MAGIC, .id = id,
						 .flags = SERVE_UNION | (resume ? SERVE_RESUME : 0),
						 .images = (uint32_t)n, .first = (uint32_t)first };
		struct iovec iov = { .iov_base = &part, .iov_len = sizeof(part) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
				      .msg_controllen = CMSG_SPACE(nfds * sizeof(int)) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		ssize_t k;

		memcpy(fds, image_fds + first, take * sizeof(int));
		if (nfds > take)
			fds[take] = fuse_fd;
		memset(&control, 0, sizeof(control));
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
		for (;;) {
			struct pollfd pfd = { .fd = sock, .events = POLLOUT };
			long long left;

			k = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k >= 0)
				break;
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -1;
			left = deadline_ms - squash_now_ms();
			if (left <= 0 || poll(&pfd, 1, (int)left) <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
		}
		if (k != (ssize_t)sizeof(part))
			return -1;
	}
	return 0;
}

/* Waits for the answer to request id (p->io held). Late answers to
 * requests whose waiter gave up are skipped; the reader runs as the user,
 * so anything malformed is its failure, not squashd's. */
static enum result await_reply(struct pool *p, uint32_t id, long long deadline_ms, char *err,
			       size_t errlen, bool *timed_out)
{
	struct serve_reply r;
	long long asked_ms = squash_now_ms();

	for (;;) {
		struct pollfd fds[2] = { { .fd = p->sock, .events = POLLIN },
					 { .fd = p->pidfd, .events = POLLIN } };
		long long left = deadline_ms - squash_now_ms();
		int n = left > 0 ? poll(fds, 2, (int)left) : 0;
		ssize_t k;

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			/* Silent for a while, not just asked when the request's
			 * time was already up: only then is it to be killed. */
			*timed_out = squash_now_ms() - asked_ms >= SILENT_READER_MS;
			snprintf(err, errlen, "squash-reader pid %d did not answer in time", (int)p->pid);
			return RESULT_NODE_ERROR;
		}
		if (n < 0 || !(fds[0].revents & POLLIN)) {
			snprintf(err, errlen, "squash-reader pid %d is gone", (int)p->pid);
			return RESULT_NODE_ERROR;
		}
		k = recv(p->sock, &r, sizeof(r), MSG_DONTWAIT | MSG_TRUNC);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0) {
			snprintf(err, errlen, "squash-reader pid %d is gone", (int)p->pid);
			return RESULT_NODE_ERROR;
		}
		if (k != (ssize_t)sizeof(r) || r.magic != SERVE_WIRE_MAGIC) {
			snprintf(err, errlen, "squash-reader pid %d sent a malformed answer", (int)p->pid);
			return RESULT_NODE_ERROR;
		}
		if (r.id != id)
			continue;
		if (r.error == 0)
			return RESULT_OK;
		r.message[sizeof(r.message) - 1] = '\0';
		/* Full (reader_wire.h), or out of threads: the reader's limits,
		 * not the image's fault; a node error retires it, later mounts
		 * get a new one. */
		bool limit = r.error == EMFILE || r.error == EAGAIN;

		if (limit)
			snprintf(err, errlen, "squash-reader pid %d takes no more mounts: %s", (int)p->pid,
				 r.message[0] ? r.message : "full");
		else
			snprintf(err, errlen, "squash-reader could not read the image: %s",
				 r.message[0] ? r.message : "error");
		for (char *c = err; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		return limit ? RESULT_NODE_ERROR : RESULT_USER_ERROR;
	}
}

/* No more mounts go to p (pools_lock held): the reader sees the end of
 * its socket and exits once its last mount is gone. The descriptor itself
 * is closed only when nobody can be using it (pool_free). */
static void retire_locked(struct pool *p)
{
	p->retired = true;
	if (p->sock >= 0)
		shutdown(p->sock, SHUT_RDWR);
}

/* Retires p and takes it out of the list; freed now unless a thread is
 * still using it (then by that thread, unuse_locked). */
static void forget_locked(struct pool *p)
{
	retire_locked(p);
	unlink_locked(p);
	if (p->users == 0)
		pool_free(p);
}

/* What goes to the reader: one image, or a union of n (image_fds). */
struct handover {
	int image_fd;
	const int *image_fds;
	size_t n;
	int fuse_fd;
	int root_fd; /* the mount's root for the start profile's walk, or -1 */
};

static enum result serve(const struct identity *id, const char *reader_path,
			 const struct handover *h, bool resume, long long deadline_ms, pid_t *pid,
			 int *pidfd, char *err, size_t errlen);

enum result reader_pool_serve(const struct identity *id, const char *reader_path, int image_fd,
			      int fuse_fd, int root_fd, bool resume, long long deadline_ms, pid_t *pid,
			      int *pidfd, char *err, size_t errlen)
{
	struct handover h = { .image_fd = image_fd, .fuse_fd = fuse_fd, .root_fd = root_fd };

	return serve(id, reader_path, &h, resume, deadline_ms, pid, pidfd, err, errlen);
}

enum result reader_pool_serve_union(const struct identity *id, const char *reader_path,
				    const int *image_fds, size_t n, int fuse_fd, bool resume,
				    long long deadline_ms, pid_t *pid, int *pidfd, char *err,
				    size_t errlen)
{
	struct handover h = { .image_fd = -1, .image_fds = image_fds, .n = n, .fuse_fd = fuse_fd,
			      .root_fd = -1 };

	return serve(id, reader_path, &h, resume, deadline_ms, pid, pidfd, err, errlen);
}

static enum result serve(const struct identity *id, const char *reader_path,
			 const struct handover *h, bool resume, long long deadline_ms, pid_t *pid,
			 int *pidfd, char *err, size_t errlen)
{
	struct pool *p;
	enum result res = RESULT_OK;
	uint32_t req_id;
	bool timed_out = false;

	pthread_mutex_lock(&pools_lock);
	/* A reader serves SERVE_MOUNTS_MAX mounts at most (reader_wire.h):
	 * past that the user's next mounts start another. */
	for (p = pools; p; p = p->next)
		if (p->uid == id->uid && !p->retired && p->sock >= 0 && p->path &&
		    p->mounts < SERVE_MOUNTS_MAX && strcmp(p->path, reader_path) == 0)
			break;
	if (!p && !(p = start_locked(id, reader_path, err, errlen))) {
		pthread_mutex_unlock(&pools_lock);
		return RESULT_NODE_ERROR;
	}
	p->mounts++;
	p->users++;
	req_id = ++p->next_id;
	*pid = p->pid;
	*pidfd = fcntl(p->pidfd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&pools_lock);

	/* A resume is sent under squashd's lock: it must never wait for
	 * another thread's request, which waits for the reader. */
	if (!resume)
		pthread_mutex_lock(&p->io);
	if (*pidfd < 0) {
		snprintf(err, errlen, "cannot watch squash-reader pid %d: %s", (int)p->pid,
			 strerror(errno));
		res = RESULT_NODE_ERROR;
	} else if ((h->image_fds ? send_union(p->sock, req_id, resume, h->image_fds, h->n, h->fuse_fd,
					      deadline_ms)
				 : send_request(p->sock, req_id, resume ? SERVE_RESUME : 0,
						(int[]){ h->image_fd, h->fuse_fd }, 2)) < 0) {
		snprintf(err, errlen, "cannot hand the mount to squash-reader pid %d: %s", (int)p->pid,
			 strerror(errno));
		res = RESULT_NODE_ERROR;
	} else if (!resume) {
		res = await_reply(p, req_id, deadline_ms, err, errlen, &timed_out);
		/* Served: its root to walk the start profile through. Only
		 * advice, so a full socket drops it. */
		if (res == RESULT_OK && h->root_fd >= 0)
			(void)send_request(p->sock, req_id, SERVE_ROOT, &h->root_fd, 1);
	}
	if (!resume)
		pthread_mutex_unlock(&p->io);

	pthread_mutex_lock(&pools_lock);
	bool listed = listed_locked(p);
	if (res != RESULT_OK) {
		/* A reader that failed squashd (not the image) takes no more. */
		if (res == RESULT_NODE_ERROR && listed) {
			log_warning("%s; retiring it: later mounts of uid %u get a new reader", err,
				    (unsigned)p->uid);
			retire_locked(p);
		}
		/* Silent (stopped by its user, or hung): killed, so that
		 * nothing of squashd's waits on it; its mounts recover as
		 * after any reader's death (docs/security.md). */
		if (timed_out && p->pidfd >= 0) {
			child_kill(p->pidfd);
			log_warning("killed squash-reader pid %d of uid %u: it did not answer in time",
				    (int)p->pid, (unsigned)p->uid);
		}
		p->mounts--;
		if (listed && p->mounts == 0) {
			/* It serves nothing (a user's first image was bad, or
			 * it failed): it must not outlive that. */
			retire_locked(p);
			unlink_locked(p);
			child_abandon(p->pidfd);
			p->pidfd = -1;
			listed = false;
		}
		if (*pidfd >= 0)
			close(*pidfd);
		*pidfd = -1;
		*pid = 0;
	}
	unuse_locked(p, listed);
	pthread_mutex_unlock(&pools_lock);
	return res;
}

void reader_pool_adopt(pid_t pid, uid_t uid)
{
	pthread_mutex_lock(&pools_lock);
	struct pool *p = find_pid_locked(pid);

	if (!p && (p = calloc(1, sizeof(*p)))) {
		/* The previous squashd's reader: its socket went with it. */
		p->uid = uid;
		p->pid = pid;
		p->pidfd = -1;
		p->sock = -1;
		pthread_mutex_init(&p->io, NULL);
		p->next = pools;
		pools = p;
	}
	if (p)
		p->mounts++;
	pthread_mutex_unlock(&pools_lock);
}

bool reader_pool_put(pid_t pid, uid_t uid)
{
	bool last = true;
	struct pool *p;

	pthread_mutex_lock(&pools_lock);
	/* By uid too: a dead reader's pid may be another user's reader's
	 * before the death is seen (reader_pool_died). */
	for (p = pools; p && !(p->pid == pid && p->uid == uid); p = p->next)
		;

	if (p) {
		if (p->mounts > 0)
			p->mounts--;
		last = p->mounts == 0;
		/* Its socket closes: it exits when its last session ends. */
		if (last)
			forget_locked(p);
	}
	pthread_mutex_unlock(&pools_lock);
	return last;
}

void reader_pool_died(pid_t pid)
{
	pthread_mutex_lock(&pools_lock);
	/* The pool of the process that died: a pool whose reader still runs
	 * is another's that got the same pid meanwhile. */
	for (struct pool *p = pools; p; p = p->next)
		if (p->pid == pid && child_exited(p->pidfd)) {
			forget_locked(p);
			break;
		}
	pthread_mutex_unlock(&pools_lock);
}

unsigned reader_pool_count(void)
{
	unsigned n = 0;

	pthread_mutex_lock(&pools_lock);
	for (const struct pool *p = pools; p; p = p->next)
		n++;
	pthread_mutex_unlock(&pools_lock);
	return n;
}

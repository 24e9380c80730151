/* One squash-reader per user and node (reader_pool.h). */
#include "config.h"

#include "mount/reader_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mount/reader_args.h"
#include "mount/reader_requests.h"
#include "passed_fds.h"
#include "process/child_process.h"
#include "process/reader_cgroup.h"
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
	bool prepared;         /* started for a restart, no mount handed to it yet */
	unsigned mounts;       /* served now, or being handed over */
	unsigned reserved;     /* more held for a restart's resumes (reader_pool_prepare) */
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
		close_detached(p->uid, p->sock);
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

/* Whether p is id's reader_path, alive and taking mounts. */
static bool serves_locked(const struct pool *p, const struct identity *id, const char *reader_path)
{
	return p->uid == id->uid && !p->retired && p->sock >= 0 && p->path && strcmp(p->path, reader_path) == 0;
}

/* The mounts p takes besides those served and held for a restart. */
static unsigned room_locked(const struct pool *p)
{
	unsigned taken = p->mounts + p->reserved;

	return taken < SERVE_MOUNTS_MAX ? SERVE_MOUNTS_MAX - taken : 0;
}

enum result reader_pool_prepare(const struct identity *id, const char *reader_path, unsigned n, char *err,
				size_t errlen)
{
	enum result res = RESULT_OK;

	/* Held, not only counted: the user's own mounts meanwhile take
	 * other room, and each resume finds its place. */
	pthread_mutex_lock(&pools_lock);
	for (struct pool *p = pools; p && n > 0; p = p->next)
		if (serves_locked(p, id, reader_path)) {
			unsigned take = room_locked(p) < n ? room_locked(p) : n;
			p->reserved += take;
			n -= take;
		}
	while (n > 0) {
		struct pool *p = start_locked(id, reader_path, err, errlen);

		if (!p) {
			res = RESULT_NODE_ERROR;
			break;
		}
		p->prepared = true;
		p->reserved = n < SERVE_MOUNTS_MAX ? n : SERVE_MOUNTS_MAX;
		n -= p->reserved;
	}
	pthread_mutex_unlock(&pools_lock);
	return res;
}

void reader_pool_release_unused(uid_t uid)
{
	pid_t ended[4];
	unsigned n = 0;

	pthread_mutex_lock(&pools_lock);
	for (struct pool *p = pools, *next; p; p = next) {
		next = p->next;
		if (p->uid == uid)
			p->reserved = 0; /* the restart is over */
		if (p->uid == uid && p->prepared && p->mounts == 0 && p->users == 0 && n < 4) {
			/* Killed, reaped in the background; no mount's watch
			 * ends its cgroup, so that is done here. */
			ended[n++] = p->pid;
			if (p->pidfd >= 0)
				child_abandon(p->pidfd);
			p->pidfd = -1;
			forget_locked(p);
		}
	}
	pthread_mutex_unlock(&pools_lock);
	for (unsigned i = 0; i < n; i++)
		reader_cgroup_end(uid, ended[i]);
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
	 * past that the user's next mounts start another. A resume takes a
	 * place reader_pool_prepare held for it. */
	for (p = pools; p; p = p->next)
		if (serves_locked(p, id, reader_path) && (resume ? p->reserved > 0 : room_locked(p) > 0))
			break;
	/* A resume runs under squashd's lock, where no reader is started
	 * (reader_pool_prepare started what it needs): one that finds none
	 * lost it to its user, who ended it again. */
	if (!p && resume) {
		snprintf(err, errlen, "the reader started to take it over is gone too");
		pthread_mutex_unlock(&pools_lock);
		return RESULT_NODE_ERROR;
	}
	if (!p && !(p = start_locked(id, reader_path, err, errlen))) {
		pthread_mutex_unlock(&pools_lock);
		return RESULT_NODE_ERROR;
	}
	p->prepared = false;
	if (resume)
		p->reserved--;
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
	} else if ((h->image_fds ? reader_send_union(p->sock, req_id, resume, h->image_fds, h->n, h->fuse_fd,
					      deadline_ms)
				 : reader_send_request(p->sock, req_id, resume ? SERVE_RESUME : 0,
						(int[]){ h->image_fd, h->fuse_fd }, 2)) < 0) {
		snprintf(err, errlen, "cannot hand the mount to squash-reader pid %d: %s", (int)p->pid,
			 strerror(errno));
		res = RESULT_NODE_ERROR;
	} else if (!resume) {
		res = reader_await_reply(p->sock, p->pidfd, p->pid, req_id, deadline_ms, err, errlen, &timed_out);
		/* Served: its root to walk the start profile through. Only
		 * advice, so a full socket drops it. */
		if (res == RESULT_OK && h->root_fd >= 0)
			(void)reader_send_request(p->sock, req_id, SERVE_ROOT, &h->root_fd, 1);
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

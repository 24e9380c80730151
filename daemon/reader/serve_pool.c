/* One set of worker threads for all sessions of squash-reader --serve
 * (serve_pool.h). */
#include "config.h"

#include "reader/serve_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "reader/ops.h"
#include "reader/worker_cpu.h"

/* The largest request a session reads: libfuse's buffer (256 pages, its
 * FUSE_MAX_MAX_PAGES and later FUSE_DEFAULT_MAX_PAGES_LIMIT, plus a 4 KiB
 * header), which FUSE_INIT may only shrink, so the kernel never needs a
 * bigger read buffer for a session libfuse answered. The pool reads with
 * its own length, so no libfuse version's size can overrun its buffer. */
#define REQUEST_PAGES 256
#define REQUEST_HEADER 0x1000

/* A worker beyond the idle ones ends after this long without a request:
 * long enough that a walk's requests never start and end threads (which
 * cost libfuse 3.18's own loop 20%, session.c), short enough that a
 * reader at rest holds idle_threads. */
#define LINGER_MS 2000

/* Watching (watch_spin): how long the other idle workers wait off the
 * set behind a watcher busy with a request before one of them goes back
 * to waiting on it, and how long a worker that follows a requester
 * sleeps on its CPU for the next request. How long the watcher polls is
 * the pool's spin_ns (--poll-us). */
#define FOLLOW_MS 5

/* One session. refs: one for the armed descriptor (EPOLLONESHOT delivers
 * each arming once, to one worker, who then holds that reference; a
 * parked arming holds it too) and one for each worker inside it. A worker
 * that finds the connection gone does not re-arm, so refs reach 0 only
 * once the session has ended and nobody is in it. */
struct pooled {
	struct fuse_session *se;
	int fd;
	atomic_uint refs;
	atomic_uint busy;          /* workers answering a request of it */
	atomic_bool parked;        /* its arming waits for one of them */
	void (*ended)(void *arg);
	void *arg;
};

struct serve_pool {
	int epfd;
	int stop_fd;                /* readable once the pool stops (eventfd) */
	size_t bufsize;
	unsigned max_threads, idle_threads;
	unsigned session_max;       /* workers one session may hold */
	pthread_mutex_t lock;
	pthread_cond_t gone;        /* a worker ended */
	unsigned threads;           /* started and not yet ended */
	unsigned waiting;           /* in epoll_wait */
	bool stopping;
	bool said_cannot_start;
	/* Watching by polling (watch_spin): */
	int64_t spin_ns;            /* the watcher polls this long; 0: no watch */
	bool watching;              /* a worker has the watch */
	bool watch_busy;            /* ... and answers what it caught */
	int64_t watch_since;        /* since then (ns) */
	bool spin_ok;               /* the last spin caught a request, or one came soon after */
	int64_t answered_at;        /* when the last request was answered (ns) */
	uint32_t last_pid;          /* who sent the last request answered */
	unsigned busy;              /* workers answering a request */
	pthread_cond_t calm;        /* the watch ended */
	struct worker_home home;    /* where workers run when they follow nobody */
};

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A scan (find, ls -R, a Python import) is one process sending a request
 * as soon as the previous one is answered. A worker that sleeps between
 * them is woken on another CPU for each, and the scanner, asleep too, is
 * woken back by the answer: two cross-CPU wake-ups per request, which
 * were most of a cold listing's time (docs/performance.md, section 13;
 * each is a VM exit on a virtual machine). So the worker that answered a
 * request of such a streak keeps the watch: it polls the set (no sleep,
 * and a request queued while nobody sleeps on the set wakes nobody) for
 * up to spin_ns before it sleeps, while the other idle workers wait off
 * the set. Polled 1 request in n costs n - 1 wasted windows at most: a
 * spin that catches nothing is not tried again until requests come
 * within a window of each other. Several requesters at once, or a watcher
 * busy for FOLLOW_MS, give the set back to all workers. A requester whose
 * CPU can be read is followed there instead (worker_cpu.h), which saves
 * the scanner's wake-up too; polling is for the others (another user's
 * process under hidepid, another pid namespace's). 1 with *ev, 0 when
 * nothing came. */
static int watch_spin(struct serve_pool *p, struct epoll_event *ev)
{
	int64_t end = now_ns() + p->spin_ns;
	int n;

	do
		n = epoll_wait(p->epfd, ev, 1, 0);
	while (n == 0 && now_ns() < end);
	return n > 0 ? 1 : 0;
}

static void *worker(void *arg);

/* Starts a worker counted in p->threads already; undoes that count when
 * it cannot. Workers block every signal, as libfuse's do: signals are the
 * main thread's, and a read or an epoll_wait is never cut short. */
static int start_worker(struct serve_pool *p)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	worker_home_attr(&p->home, &attr);
	r = pthread_create(&t, &attr, worker, p);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		pthread_mutex_lock(&p->lock);
		p->threads--;
		bool say = !p->said_cannot_start;
		p->said_cannot_start = true;
		pthread_cond_broadcast(&p->gone);
		pthread_mutex_unlock(&p->lock);
		/* EAGAIN: most likely the pids limit of the user's reader
		 * cgroup (squashd's reader_tasks_max). The workers there
		 * serve on, only fewer requests at once. */
		if (say)
			fprintf(stderr, "squash-reader: cannot start a worker thread: %s\n", strerror(r));
	}
	return r;
}

/* Re-arms s's descriptor, which takes a reference the caller holds; false
 * when it cannot (the caller keeps the reference). */
static bool rearm(struct serve_pool *p, struct pooled *s)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.ptr = s };

	if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, s->fd, &ev) == 0)
		return true;
	/* Nothing but a lack of memory fails it for a registered
	 * descriptor: the session is no longer served, and ends. */
	fprintf(stderr, "squash-reader: cannot wait for a mount's requests: %s\n", strerror(errno));
	return false;
}

/* Lets go of one reference to s; the last one ends it. */
static void put(struct serve_pool *p, struct pooled *s)
{
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	/* Another descriptor of the connection may stay open (squashd keeps
	 * one), so closing ours would not take it out of the set. */
	epoll_ctl(p->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	s->ended(s->arg);
	free(s);
}

/* Lock held: ends this worker's watch; the idle workers wait on the set again. */
static void watch_end(struct serve_pool *p, bool *duty)
{
	if (!*duty)
		return;
	*duty = false;
	p->watching = false;
	p->watch_busy = false;
	pthread_cond_broadcast(&p->calm);
}

/* Serves one request of s, whose armed reference the caller holds.
 * Returns the pid that sent it, 0 when none was served; *is_read: it was a
 * READ (never a scan's: watch_spin). duty: the caller has the watch. */
static uint32_t serve_one(struct serve_pool *p, struct pooled *s, void *mem, bool *duty,
			  bool *is_read)
{
	uint32_t pid;
	struct fuse_buf buf;
	ssize_t k;

	/* libfuse ends a session itself when FUSE_INIT fails. */
	if (fuse_session_exited(s->se)) {
		put(p, s);
		return 0;
	}
	do
		k = read(s->fd, mem, p->bufsize);
	/* ENOENT: the request was interrupted before it was read. */
	while (k < 0 && (errno == EINTR || errno == ENOENT));
	if (k < 0 && errno == EAGAIN) {
		/* Withdrawn between the wake-up and the read. */
		if (!rearm(p, s))
			put(p, s);
		return 0;
	}
	if (k < (ssize_t)sizeof(struct fuse_in_header)) {
		/* ENODEV: unmounted, or the connection aborted. */
		if (k >= 0 || errno != ENODEV)
			fprintf(stderr, "squash-reader: reading a mount's requests: %s\n",
				k < 0 ? strerror(errno) : "short read");
		put(p, s);
		return 0;
	}
	pid = ((const struct fuse_in_header *)mem)->pid;
	/* Reads come several at once (the kernel's readahead, FUSE_ASYNC_READ)
	 * and each may take a while: the other workers must be on the set for
	 * them, and a streaming read is no scan (polling cost it a quarter of
	 * its rate). */
	*is_read = ((const struct fuse_in_header *)mem)->opcode == FUSE_READ;
	if (*is_read) {
		if (*duty) {
			pthread_mutex_lock(&p->lock);
			watch_end(p, duty);
			pthread_mutex_unlock(&p->lock);
		}
	}
	/* The session's next request may be read by another worker while
	 * this one is answered: a reference for the armed descriptor, while
	 * this worker keeps its own. Only one worker at a time gets here for
	 * a session (its descriptor is disarmed until then), so the count
	 * decides alone. A session holding all workers but one parks its
	 * arming until one of its requests is answered: requests that hang
	 * (an image on a file system that stopped answering) leave the
	 * other mounts a worker. */
	atomic_fetch_add(&s->refs, 1);
	if (atomic_fetch_add(&s->busy, 1) + 1 < p->session_max) {
		if (!rearm(p, s))
			put(p, s);
	} else {
		atomic_store(&s->parked, true);
	}
	memset(&buf, 0, sizeof(buf));
	buf.mem = mem;
	buf.size = (size_t)k;
	fuse_session_process_buf(s->se, &buf);
	atomic_fetch_sub(&s->busy, 1);
	/* Whoever takes the parked arming re-arms (the one that parked
	 * always looks, so it is never left behind). */
	if (atomic_exchange(&s->parked, false) && !rearm(p, s))
		put(p, s);
	put(p, s);
	return pid;
}

static void *worker(void *arg)
{
	struct serve_pool *p = arg;
	/* Per worker: a request stays in it until it is answered. */
	void *mem = malloc(p->bufsize);
	bool duty = false;       /* this worker has the watch (watch_spin) */
	uint32_t served = 0;     /* the pid of the request it just answered, unless a read */
	int follow = -1;         /* the CPU of the requester it answered (worker_cpu.h) */
	int pinned = -1;         /* the CPU it follows a requester on */

	pthread_mutex_lock(&p->lock);
	while (mem && !p->stopping) {
		struct epoll_event ev = { 0 };
		int timeout = p->threads > p->idle_threads ? LINGER_MS : -1;
		int n = -1, cpu = follow;

		follow = -1;
		/* A requester alone, answered just now (its read too: a small
		 * file's open, read and close is one READ): wait for its next
		 * request on its CPU. The other workers stay
		 * on the set, as epoll wakes the thread that began to wait last
		 * first: this one. (Keeping them off made every request that
		 * came while this one was busy wait for it, up to FOLLOW_MS, and
		 * each read moved this worker home and back.) */
		if (cpu >= 0 && p->busy == 0 && !p->watching) {
			watch_end(p, &duty);
			p->waiting++;
			pthread_mutex_unlock(&p->lock);
			if (worker_follow(cpu, &pinned))
				n = epoll_wait(p->epfd, &ev, 1, FOLLOW_MS);
			pthread_mutex_lock(&p->lock);
			p->waiting--;
			if (n <= 0)
				n = -1;
		} else if (p->spin_ns > 0 && served && served == p->last_pid && p->busy == 0 &&
			   p->spin_ok && (duty || !p->watching)) {
			/* One requester alone, answered just now: watch for its next. */
			duty = p->watching = true;
			p->watch_busy = false;
			p->waiting++;
			pthread_mutex_unlock(&p->lock);
			worker_go_home(&p->home, &pinned);
			n = watch_spin(p, &ev);
			pthread_mutex_lock(&p->lock);
			p->waiting--;
			if (n > 0) {
				p->watch_busy = true;
				p->watch_since = now_ns();
			} else {
				watch_end(p, &duty);
				p->spin_ok = false;
				n = -1;
			}
		} else {
			watch_end(p, &duty);
			worker_go_home(&p->home, &pinned);
			/* Off the set behind a watcher, unless it is stuck. */
			if (p->watching && (!p->watch_busy || now_ns() - p->watch_since < FOLLOW_MS * 1000000L)) {
				struct timespec t;

				clock_gettime(CLOCK_REALTIME, &t);
				t.tv_nsec += FOLLOW_MS * 1000000L;
				t.tv_sec += t.tv_nsec / 1000000000;
				t.tv_nsec %= 1000000000;
				p->waiting++;
				pthread_cond_timedwait(&p->calm, &p->lock, &t);
				p->waiting--;
				served = 0;
				continue;
			}
		}
		if (n < 0) {
			p->waiting++;
			pthread_mutex_unlock(&p->lock);
			worker_go_home(&p->home, &pinned);
			n = epoll_wait(p->epfd, &ev, 1, timeout);
			pthread_mutex_lock(&p->lock);
			p->waiting--;
			/* Counted out in the same breath: workers whose waits end
			 * together must not all see the others still there. */
			if (n == 0 && p->threads > p->idle_threads)
				break;
			if (n > 0 && !p->spin_ok && now_ns() - p->answered_at < p->spin_ns)
				p->spin_ok = true;
		}
		served = 0;
		if (n <= 0 || !ev.data.ptr) /* a timeout, EINTR; or the stop */
			continue;
		/* Nobody left waiting: the next request would wait for this one. */
		bool grow = p->waiting == 0 && p->threads < p->max_threads && !p->stopping;

		if (grow)
			p->threads++;
		p->busy++;
		pthread_mutex_unlock(&p->lock);
		if (grow)
			start_worker(p);
		bool was_read = false;
		uint32_t pid = serve_one(p, ev.data.ptr, mem, &duty, &was_read);

		/* Only read, outside the lock. A READ's requester is followed
		 * only when bound: one free to move computes on its CPU while the
		 * kernel's readahead has the next blocks decompressed on another
		 * (an md5sum of every file was 10% slower followed). */
		follow = pid && p->spin_ns > 0 ? requester_cpu(pid, was_read) : -1;
		pthread_mutex_lock(&p->lock);
		p->busy--;
		if (was_read)
			pid = 0; /* no scan's: never polled for */
		/* Another requester in between: not a scan of one. */
		served = pid && (pid == p->last_pid || !duty) ? pid : 0;
		if (pid)
			p->last_pid = pid;
		p->answered_at = now_ns();
	}
	watch_end(p, &duty);
	p->threads--;
	pthread_cond_broadcast(&p->gone);
	pthread_mutex_unlock(&p->lock);
	if (!mem)
		fprintf(stderr, "squash-reader: out of memory for a worker thread\n");
	free(mem);
	return NULL;
}

struct serve_pool *serve_pool_new(unsigned max_threads, unsigned idle_threads, unsigned poll_us)
{
	struct serve_pool *p = calloc(1, sizeof(*p));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	long page = sysconf(_SC_PAGESIZE);

	if (!p)
		return NULL;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	/* The stop: level-triggered and never read, so it wakes every
	 * worker, now and later. */
	if (p->epfd < 0 || p->stop_fd < 0 || epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->stop_fd, &ev) < 0) {
		int e = errno;

		if (p->epfd >= 0)
			close(p->epfd);
		if (p->stop_fd >= 0)
			close(p->stop_fd);
		free(p);
		errno = e;
		return NULL;
	}
	p->bufsize = (size_t)REQUEST_PAGES * (size_t)(page > 0 ? page : 4096) + REQUEST_HEADER;
	p->max_threads = max_threads ? max_threads : 1;
	/* At least one stays: only a request wakes a worker, and only a
	 * worker starts another. */
	p->idle_threads = idle_threads < 1 ? 1 : idle_threads < p->max_threads ? idle_threads : p->max_threads;
	p->session_max = p->max_threads > 1 ? p->max_threads - 1 : 1;
	p->spin_ok = true;
	p->spin_ns = (int64_t)poll_us * 1000;
	worker_home_init(&p->home);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->gone, NULL);
	pthread_cond_init(&p->calm, NULL);
	return p;
}

int serve_pool_add(struct serve_pool *p, struct fuse_session *se, void (*ended)(void *arg),
		   void *arg)
{
	struct pooled *s = calloc(1, sizeof(*s));
	struct epoll_event ev;
	int fl, r = 0;

	if (!s)
		return ENOMEM;
	s->se = se;
	s->fd = fuse_session_fd(se);
	s->ended = ended;
	s->arg = arg;
	atomic_init(&s->refs, 1);
	atomic_init(&s->busy, 0);
	atomic_init(&s->parked, false);
	/* A request announced by epoll may be withdrawn (interrupted) before
	 * the worker reads it: that read must not sleep. (The flag is the
	 * connection's: squashd's kept descriptor and a later reader that
	 * takes it over see it too; session.c clears it for its own loop.) */
	fl = fcntl(s->fd, F_GETFL);
	if (fl < 0 || fcntl(s->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		r = errno;
		free(s);
		return r;
	}
	/* The first session starts the first worker; later ones come as
	 * requests wait. */
	pthread_mutex_lock(&p->lock);
	bool first = p->threads == 0;

	if (first)
		p->threads++;
	pthread_mutex_unlock(&p->lock);
	if (first && (r = start_worker(p)) != 0) {
		free(s);
		return r;
	}
	ev = (struct epoll_event){ .events = EPOLLIN | EPOLLONESHOT, .data.ptr = s };
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
		r = errno;
		free(s);
		return r;
	}
	return 0;
}

void serve_pool_free(struct serve_pool *p)
{
	uint64_t one = 1;

	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->calm);
	pthread_mutex_unlock(&p->lock);
	if (write(p->stop_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		fprintf(stderr, "squash-reader: cannot stop the worker threads: %s\n", strerror(errno));
	pthread_mutex_lock(&p->lock);
	while (p->threads > 0)
		pthread_cond_wait(&p->gone, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_cond_destroy(&p->gone);
	pthread_cond_destroy(&p->calm);
	pthread_mutex_destroy(&p->lock);
	close(p->stop_fd);
	close(p->epfd);
	free(p);
}

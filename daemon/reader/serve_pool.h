/* The worker threads of squash-reader --serve: one set for the whole
 * process, serving the requests of every FUSE session it holds, so that
 * a reader's threads are bounded by its own limit and do not grow with
 * its mounts (a session of its own per mount had 3 threads at rest: 600
 * for 200 mounts, against the user's reader_tasks_max).
 *
 * Each session's /dev/fuse descriptor is made non-blocking and put in one
 * epoll set with EPOLLONESHOT: the worker that is woken reads one request,
 * re-arms the descriptor (so that another worker may read the session's
 * next request meanwhile) and processes it. Threads start as requests wait,
 * up to max_threads, of which one session holds all but one at most (a
 * mount whose image hangs leaves the others a worker); past idle_threads,
 * a worker that has had nothing to do for a while ends. The worker that
 * answered a process alone (a scan) follows it to its CPU and sleeps there
 * for its next request (after a read only when the process is bound to
 * one CPU), while the others stay on the set,
 * so that neither the scanner nor a worker is woken across CPUs for each
 * request (worker_cpu.h); when the requester's CPU cannot be read, it
 * polls the set for a short while instead, the other idle workers off the
 * set (serve_pool.c, watch_spin). */
#ifndef SQUASH_READER_SERVE_POOL_H
#define SQUASH_READER_SERVE_POOL_H

struct fuse_session;
struct serve_pool;

/* A pool of at most max_threads workers (>= 1), idle_threads of which stay
 * when there is nothing to do; none runs before the first session. The
 * worker that answered a scan's request polls poll_us for the next, or
 * waits for it on the scanner's CPU when the scanner is bound to one (0:
 * neither). NULL (errno set) when it cannot be made. */
struct serve_pool *serve_pool_new(unsigned max_threads, unsigned idle_threads, unsigned poll_us);

/* Serves se's requests from now on (it must be mounted: attached to its
 * /dev/fuse descriptor). Once its connection is gone (unmounted, aborted)
 * and no worker is in it any more, ended(arg) is called, once, from a
 * worker: it must let go of se. Returns 0, or a positive errno when se
 * cannot be served (then ended is never called). */
int serve_pool_add(struct serve_pool *p, struct fuse_session *se, void (*ended)(void *arg),
		   void *arg);

/* Ends the workers and frees p. Every session added must have ended. */
void serve_pool_free(struct serve_pool *p);

#endif

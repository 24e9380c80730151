#include "config.h"
#include "server/workers.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "array_grow.h"
#include "clock.h"
#include "core/budget_rows.h"
#include "core/given_up_mounts.h"
#include "core/gc.h"
#include "core/kernel_prefetches.h"
#include "core/pinned_loops.h"
#include "core/user_budgets.h"
#include "core/user_fds.h"
#include "core/user_fuse_mounts.h"
#include "frame.h"
#include "passed_fds.h"
#include "process/child_process.h"
#include "server/accept_guard.h"
#include "server/connections.h"
#include "server/server.h"
#include "server/user_queues.h"
#include "util/log.h"
#include "util/peer.h"

#define WORKER_STACK (512 * 1024)
/* After a burst of at least this many requests at once, free memory goes
 * back to the system once the daemon is idle (see trim_after_burst). */
#define TRIM_AFTER_PEAK 4
/* How long a stop waits for requests in progress. */
#define STOP_GRACE_MS 3000

static struct daemon_state *served;
/* Workers signal their end: the stop waits on it. */
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static unsigned peak; /* most requests at once since the last trim */
static int wake_fd = -1; /* a worker finished: the main loop starts the next */
static void (*reload_fn)(void *);
static void *reload_arg;

void server_on_reload(void (*fn)(void *arg), void *arg)
{
	reload_fn = fn;
	reload_arg = arg;
}

int server_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "socket path %s is too long", path);
		return -1;
	}
	strcpy(addr.sun_path, path);

	int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
		close(probe);
		snprintf(err, errlen, "another squashd is already listening on %s", path);
		return -1;
	}
	if (probe >= 0)
		close(probe);
	if (unlink(path) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "cannot remove stale socket %s: %s", path, strerror(errno));
		return -1;
	}

	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	/* Before any client can connect (main.c says when it cannot). */
	(void)squash_refuse_passed_fds(fd);
	mode_t old = umask(0);
	int rc = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
	umask(old);
	/* A burst of prologs queues in the backlog while workers are busy. */
	if (rc < 0 || chmod(path, 0666) < 0 || listen(fd, SOMAXCONN) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void *serve_parked(void *arg)
{
	struct parked *p = arg;
	uint64_t one = 1;
	int flags = fcntl(p->fd, F_GETFL);

	/* Read without blocking by the main loop; answered the usual way. */
	if (flags >= 0)
		(void)fcntl(p->fd, F_SETFL, flags & ~O_NONBLOCK);
	server_answer(served, p->fd, &p->peer, p->frame, p->len, p->uid, p->deadline_ms);
	connection_close(p->fd);
	user_queue_done(p->uid);
	free(p);
	pthread_mutex_lock(&done_lock);
	pthread_cond_broadcast(&done_cond);
	pthread_mutex_unlock(&done_lock);
	if (write(wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_debug("cannot wake the main loop: %s", strerror(errno));
	return NULL;
}

static void start_worker(struct parked *p)
{
	pthread_attr_t attr;
	pthread_t t;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, WORKER_STACK);
	int rc = pthread_create(&t, &attr, serve_parked, p);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		log_error("cannot start a worker for uid %u pid %d: %s", (unsigned)p->peer.uid,
			  (int)p->peer.pid, strerror(rc));
		server_refuse(p->fd, &p->peer, SQUASH__STATUS__UNAVAILABLE,
			      "squashd on this node cannot start a thread: %s", strerror(rc));
		connection_close(p->fd);
		user_queue_done(p->uid);
		free(p);
	}
}

/* Starts every queued request the pool and the users' shares allow. */
static void start_waiting(void)
{
	const struct squashd_config *cfg = settings_hold();
	struct parked *p;

	while ((p = user_queue_next(cfg->max_requests_per_user)))
		start_worker(p);
	settings_drop(cfg);
	unsigned running = user_queue_running();
	if (running > peak)
		peak = running;
}

/* Refuses the queued requests whose deadline passed (every one when
 * now_ms < 0: stopping). */
static void refuse_waiting(long long now_ms)
{
	const struct squashd_config *cfg = settings_hold();
	unsigned running = 0;
	struct parked *p;

	while ((p = user_queue_expired(now_ms, &running))) {
		if (now_ms < 0) {
			server_refuse(p->fd, &p->peer, SQUASH__STATUS__UNAVAILABLE, "squashd is stopping");
		} else {
			log_warning("request from uid %u pid %d for uid %u refused: %u requests for that user still "
				    "in progress after %u s (max_requests_per_user)", (unsigned)p->peer.uid,
				    (int)p->peer.pid, (unsigned)p->uid, running, cfg->request_timeout_s);
			server_refuse(p->fd, &p->peer, SQUASH__STATUS__NODE_ERROR,
				      "squashd on this node is still working on %u requests for uid %u "
				      "(max_requests_per_user = %u) and none ended within %u s; is one of that "
				      "user's file systems hung?", running, (unsigned)p->uid,
				      cfg->max_requests_per_user, cfg->request_timeout_s);
		}
		connection_close(p->fd);
		free(p);
	}
	settings_drop(cfg);
}

/* A request frame was read (main loop): queued for the user it works for. */
static void request_read(void *arg, int fd, const struct peer *peer, const uint8_t *frame, size_t len,
			 int rc)
{
	(void)arg;
	if (rc == CONNECTION_STARVED) {
		server_refuse(fd, peer, SQUASH__STATUS__NODE_ERROR,
			      "squashd on this node is out of file descriptors; ask again shortly");
		connection_close(fd);
		accept_guard_refill();
		return;
	}
	if (rc == SQUASH_FRAME_ETOOBIG) {
		server_refuse_oversized(fd, peer);
		connection_close(fd);
		return;
	}
	/* A process gone before squashd looked at it has no user to count its
	 * request for (util/peer.h): served, it would work on slots of its
	 * own, a second share for a user who connects, hands the socket to a
	 * child and exits. A client waits for its answer; root is known by
	 * its uid alone. */
	if (peer->uid != 0 && peer->user == PEER_USER_GONE) {
		log_peer_warning(peer->user, "request from uid %u pid %d refused: that process had exited "
				 "before squashd looked at it", (unsigned)peer->uid, (int)peer->pid);
		server_refuse(fd, peer, SQUASH__STATUS__DENIED,
			      "the process that connected (pid %d) had exited before squashd looked at it: "
			      "ask from the process that waits for the answer", (int)peer->pid);
		connection_close(fd);
		return;
	}
	struct parked *p = malloc(sizeof(*p) + len);
	if (!p) {
		log_error("out of memory reading a request from uid %u pid %d", (unsigned)peer->uid,
			  (int)peer->pid);
		connection_close(fd);
		return;
	}
	const struct squashd_config *cfg = settings_hold();
	*p = (struct parked){ .fd = fd, .peer = *peer, .len = len };
	memcpy(p->frame, frame, len);
	bool release;
	p->uid = server_worked_for(served, peer, frame, len, &release);
	/* An epilog's release waits past max_queued_per_user (bounded by the
	 * connections), ahead of the user's other waiting requests and for
	 * two request_timeouts: the requests running for the user end by
	 * one, so a user who keeps their slots hung cannot have it refused
	 * (its mounts would be left to gc, and a lost job shows in health). */
	p->first = release;
	p->deadline_ms = squash_now_ms() + (long long)cfg->request_timeout_s * (release ? 2000 : 1000);
	unsigned max_queued = release ? MAX_CONNECTIONS : cfg->max_queued_per_user;
	unsigned running = 0, queued = 0;
	if (!user_queue_push(p, cfg->max_requests_per_user, max_queued, &running, &queued)) {
		log_peer_warning(peer->user, "request from uid %u pid %d for uid %u refused: %u requests "
				 "for that user in progress and %u waiting (max_queued_per_user)",
				 (unsigned)peer->uid, (int)peer->pid, (unsigned)p->uid, running, queued);
		server_refuse(fd, peer, SQUASH__STATUS__NODE_ERROR,
			      "squashd on this node already has %u requests for uid %u waiting behind the %u it "
			      "works on (max_queued_per_user = %u, max_requests_per_user = %u); is one of that "
			      "user's file systems hung?", queued, (unsigned)p->uid, running,
			      cfg->max_queued_per_user, cfg->max_requests_per_user);
		connection_close(fd);
		free(p);
	}
	settings_drop(cfg);
}

/* Connections taken per pass of the main loop: a user who connects and
 * hangs up as fast as squashd accepts would otherwise keep the backlog
 * full and the loop here, with the requests already read never started,
 * the signals never handled. The listening socket stays readable, so the
 * next pass takes the next ones. */
#define ACCEPTS_PER_PASS 64

static void accept_connections(int listen_fd)
{
	for (int taken = 0; taken < ACCEPTS_PER_PASS && !connections_full(); taken++) {
		bool starved;
		int fd = accept_guarded(listen_fd, &starved);
		if (fd < 0)
			return;
		struct peer peer;
		if (peer_identify(fd, &peer) < 0) {
			close(fd);
			if (starved)
				accept_guard_refill();
			continue;
		}
		/* Answers up to SQUASH_FRAME_MAX must fit the send buffer. */
		int sndbuf = SQUASH_FRAME_MAX + 4096;
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
		if (!connection_take(fd, &peer, starved, request_read, NULL) && starved)
			accept_guard_refill();
	}
}

/* A burst leaves freed memory in as many malloc arenas as there were
 * threads at once (16 on 2 cores): about 20 MiB of RSS that malloc keeps
 * for good. Giving it back when the burst is over costs well under a
 * millisecond, off every request's path (docs/performance.md, "Memory"). */
static void trim_after_burst(void)
{
	if (user_queue_running() == 0 && peak >= TRIM_AFTER_PEAK) {
		peak = 0;
		malloc_trim(0);
	}
}

/* Returns 1 when asked to stop. */
static int handle_signal(int sfd)
{
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
			log_info("stopping on signal %u; mounts stay for their jobs", si.ssi_signo);
			return 1;
		case SIGHUP:
			if (reload_fn)
				reload_fn(reload_arg);
			break;
		default:
			break;
		}
	}
	return 0;
}

void server_block_signals(void)
{
	sigset_t mask;
	sigemptyset(&mask);
	/* SIGCHLD stays blocked and unread: children are waited for through
	 * pidfds (child_process.h), never through waitpid(-1). */
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
}

/* Gives requests in progress a moment to finish (they give up their own
 * waits once stopping), then returns whatever is left. */
static void wait_for_workers(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += STOP_GRACE_MS / 1000;
	pthread_mutex_lock(&done_lock);
	while (user_queue_running() > 0)
		if (pthread_cond_timedwait(&done_cond, &done_lock, &ts) == ETIMEDOUT)
			break;
	unsigned left = user_queue_running();
	if (left > 0)
		log_warning("stopping with %u request(s) still in progress", left);
	pthread_mutex_unlock(&done_lock);
}

/* poll's timeout: until the earliest of the deadlines given (-1: none). */
static int poll_timeout(long long now, const long long *deadlines, size_t n)
{
	long long next = -1;

	for (size_t i = 0; i < n; i++)
		if (deadlines[i] > 0 && (next < 0 || deadlines[i] < next))
			next = deadlines[i];
	if (next < 0)
		return -1;
	return next <= now ? 0 : (int)(next - now < 60000 ? next - now : 60000);
}

int server_run(int listen_fd, struct daemon_state *ds)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sfd < 0 || stop_fd < 0 || wake_fd < 0) {
		log_error("signalfd/eventfd: %s", strerror(errno));
		return -1;
	}
	child_set_stop_fd(stop_fd);
	served = ds;
	accept_guard_init();
	user_budgets_add_source(user_queue_budget_rows);
	user_budgets_add_source(user_fds_budget_rows);
	user_budgets_add_source(registry_budget_rows);
	user_budgets_add_source(watcher_budget_rows);
	user_budgets_add_source(reader_budget_rows);
	user_budgets_add_source(given_up_mounts_budget_rows);
	user_budgets_add_source(image_work_budget_rows);
	user_budgets_add_source(user_fuse_mounts_budget_rows);
	user_budgets_add_source(kernel_prefetches_budget_rows);
	user_budgets_add_source(pinned_loops_budget_rows);

	struct pollfd *pfd = NULL;
	size_t pfd_cap = 0;
	int stop = 0;
	sd_notify(0, "READY=1\nSTATUS=serving");
	while (!stop) {
		accept_guard_refill(); /* a starved connection's ended */
		size_t n_read = connections_reading();
		if (array_reserve(&pfd, &pfd_cap, 3 + n_read, sizeof(*pfd), 16) < 0) {
			log_error("out of memory polling %zu connections", n_read);
			break;
		}
		long long now = squash_now_ms();
		bool listen = !connections_full() && !accept_guard_paused_until();
		pfd[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
		pfd[2] = (struct pollfd){ .fd = listen ? listen_fd : -1, .events = POLLIN };
		connections_poll_fill(pfd + 3);
		long long deadlines[] = { connections_next_deadline(), user_queue_next_deadline(),
					  accept_guard_paused_until() };
		int timeout = poll_timeout(now, deadlines, sizeof(deadlines) / sizeof(deadlines[0]));
		if (poll(pfd, 3 + n_read, timeout) < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents & POLLIN)
			stop = handle_signal(sfd);
		if (pfd[1].revents & POLLIN) {
			uint64_t v;
			while (read(wake_fd, &v, sizeof(v)) > 0)
				;
			trim_after_burst();
		}
		if (stop)
			break;
		now = squash_now_ms();
		connections_read(pfd + 3, n_read, now, request_read, NULL);
		refuse_waiting(now);
		if (pfd[2].revents & POLLIN)
			accept_connections(listen_fd);
		start_waiting();
	}
	free(pfd);
	/* Stop promptly: waits give up (stop_fd, the condition variable) and
	 * answer UNAVAILABLE, so clients retry against the next squashd. */
	uint64_t one = 1;
	if (write(stop_fd, &one, sizeof(one)) < 0)
		log_warning("cannot signal the stop: %s", strerror(errno));
	daemon_stop(ds);
	gc_stop();
	connections_close_reading();
	refuse_waiting(-1);
	wait_for_workers();
	close(sfd);
	sd_notify(0, "STOPPING=1");
	return 0;
}

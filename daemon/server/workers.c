#include "config.h"
#include "server/workers.h"

#include <errno.h>
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

#include "core/gc.h"
#include "frame.h"
#include "process/child_process.h"
#include "server/server.h"
#include "util/log.h"
#include "util/peer.h"

/* Requests served at once. Beyond it connections wait in the listen
 * backlog (they are not dropped) until a worker is free. */
#define MAX_WORKERS 512
/* Non-root peers (users' squashctl and steps' queries) share the node
 * fairly; root (slurmd's prolog and epilog, slurmstepd) is never limited. */
#define MAX_CONNECTIONS_PER_USER 16
#define CONNECTION_IDLE_MS 5000
#define WORKER_STACK (512 * 1024)
/* After a burst of at least this many requests at once, free memory goes
 * back to the system once the daemon is idle (see trim_after_burst). */
#define TRIM_AFTER_PEAK 4
/* How long a stop waits for requests in progress. */
#define STOP_GRACE_MS 3000

struct connection {
	int fd;
	struct peer peer;
	struct daemon_state *ds;
};

/* Who is connected: guards the counts below; the main loop waits on it. */
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conn_idle = PTHREAD_COND_INITIALIZER;
static unsigned active;
static unsigned peak; /* most requests at once since the last trim */
static struct {
	uid_t uid;
	unsigned count;
} per_user[MAX_WORKERS];
static size_t n_users;
static int wake_fd = -1; /* a worker finished while the main loop waited for one */
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

static void connection_done(const struct connection *c)
{
	uint64_t one = 1;

	pthread_mutex_lock(&conn_lock);
	active--;
	for (size_t i = 0; i < n_users; i++) {
		if (per_user[i].uid == c->peer.uid) {
			if (--per_user[i].count == 0)
				per_user[i] = per_user[--n_users];
			break;
		}
	}
	pthread_cond_broadcast(&conn_idle);
	pthread_mutex_unlock(&conn_lock);
	if (write(wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_debug("cannot wake the main loop: %s", strerror(errno));
}

static void *serve_connection(void *arg)
{
	struct connection *c = arg;
	uint8_t *buf = malloc(SQUASH_FRAME_MAX);
	size_t len = 0;

	if (!buf) {
		log_error("out of memory reading a request from uid %u pid %d", (unsigned)c->peer.uid,
			  (int)c->peer.pid);
	} else {
		int rc = squash_frame_recv(c->fd, buf, &len, CONNECTION_IDLE_MS);
		if (rc == SQUASH_FRAME_OK)
			server_answer(c->ds, c->fd, &c->peer, buf, len);
		else if (rc == SQUASH_FRAME_ETOOBIG)
			server_refuse_oversized(c->fd, &c->peer);
		else if (rc == SQUASH_FRAME_ETIMEDOUT)
			log_debug("closing idle connection from uid %u pid %d", (unsigned)c->peer.uid,
				  (int)c->peer.pid);
	}
	free(buf);
	close(c->fd);
	connection_done(c);
	free(c);
	return NULL;
}

/* Admits a connection (conn_lock held). Returns false when the peer is
 * over its share; root always gets in. */
static bool admit(const struct peer *peer)
{
	size_t i;

	for (i = 0; i < n_users && per_user[i].uid != peer->uid; i++)
		;
	if (peer->uid != 0 && i < n_users && per_user[i].count >= MAX_CONNECTIONS_PER_USER)
		return false;
	if (i == n_users)
		per_user[n_users++] = (typeof(per_user[0])){ peer->uid, 0 };
	per_user[i].count++;
	active++;
	if (active > peak)
		peak = active;
	return true;
}

static void start_worker(struct daemon_state *ds, int fd, const struct peer *peer)
{
	struct connection *c = malloc(sizeof(*c));
	pthread_attr_t attr;
	pthread_t t;
	int rc = -1;

	if (c) {
		*c = (struct connection){ fd, *peer, ds };
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, WORKER_STACK);
		rc = pthread_create(&t, &attr, serve_connection, c);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		log_error("cannot start a worker for uid %u pid %d: %s", (unsigned)peer->uid,
			  (int)peer->pid, c ? strerror(rc) : "out of memory");
		free(c);
		close(fd);
		connection_done(&(struct connection){ .peer = *peer });
	}
}

static void accept_connections(int listen_fd, struct daemon_state *ds)
{
	for (;;) {
		pthread_mutex_lock(&conn_lock);
		bool full = active >= MAX_WORKERS;
		pthread_mutex_unlock(&conn_lock);
		if (full)
			return; /* the rest wait in the backlog */
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warning("accept: %s", strerror(errno));
			return;
		}
		struct peer peer;
		if (peer_identify(fd, &peer) < 0) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&conn_lock);
		bool ok = admit(&peer);
		pthread_mutex_unlock(&conn_lock);
		if (!ok) {
			log_warning("too many connections from uid %u; refusing one from pid %d",
				    (unsigned)peer.uid, (int)peer.pid);
			close(fd);
			continue;
		}
		/* Answers up to SQUASH_FRAME_MAX must fit the send buffer. */
		int sndbuf = SQUASH_FRAME_MAX + 4096;
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
		start_worker(ds, fd, &peer);
	}
}

/* A burst leaves freed memory in as many malloc arenas as there were
 * threads at once (16 on 2 cores): about 20 MiB of RSS that malloc keeps
 * for good. Giving it back when the burst is over costs well under a
 * millisecond, off every request's path (docs/performance.md, "Memory"). */
static void trim_after_burst(void)
{
	pthread_mutex_lock(&conn_lock);
	bool trim = active == 0 && peak >= TRIM_AFTER_PEAK;
	if (trim)
		peak = 0;
	pthread_mutex_unlock(&conn_lock);
	if (trim)
		malloc_trim(0);
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
	pthread_mutex_lock(&conn_lock);
	while (active > 0)
		if (pthread_cond_timedwait(&conn_idle, &conn_lock, &ts) == ETIMEDOUT)
			break;
	if (active > 0)
		log_warning("stopping with %u request(s) still in progress", active);
	pthread_mutex_unlock(&conn_lock);
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

	int stop = 0;
	sd_notify(0, "READY=1\nSTATUS=serving");
	while (!stop) {
		struct pollfd pfd[3] = {
			{ .fd = sfd, .events = POLLIN },
			{ .fd = wake_fd, .events = POLLIN },
			{ .fd = listen_fd, .events = POLLIN },
		};
		pthread_mutex_lock(&conn_lock);
		bool full = active >= MAX_WORKERS;
		pthread_mutex_unlock(&conn_lock);
		if (poll(pfd, full ? 2 : 3, -1) < 0 && errno != EINTR) {
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
		if (!stop && (full || (pfd[2].revents & POLLIN)))
			accept_connections(listen_fd, ds);
	}
	/* Stop promptly: waits give up (stop_fd, the condition variable) and
	 * answer UNAVAILABLE, so clients retry against the next squashd. */
	uint64_t one = 1;
	if (write(stop_fd, &one, sizeof(one)) < 0)
		log_warning("cannot signal the stop: %s", strerror(errno));
	daemon_stop(ds);
	gc_stop();
	wait_for_workers();
	close(sfd);
	sd_notify(0, "STOPPING=1");
	return 0;
}

#include "config.h"
#include "server.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "credential.h"
#include "frame.h"
#include "log.h"
#include "peer.h"
#include "policy.h"
#include "request_codec.h"
#include "clock.h"

#define MAX_CONNECTIONS 64
#define MAX_CONNECTIONS_PER_USER 8 /* root is exempt: slurmd must get through */
#define CONNECTION_IDLE_MS 5000

struct connection {
	int fd;
	struct peer peer;
	long long deadline_ms;
};

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
	if (rc < 0 || chmod(path, 0666) < 0 || listen(fd, 128) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void handle_request(struct daemon_state *ds, struct connection *c,
			   const uint8_t *buf, size_t len)
{
	struct reply out;
	reply_init(&out);
	struct squash_decoded_request d;
	Squash__Status status;
	char err[SQUASH_PATH_MAX + 256];

	if (squash_request_decode(buf, len, &d, &status, err, sizeof(err)) < 0) {
		log_warning("bad request from uid %u pid %d: %s", (unsigned)c->peer.uid,
			    (int)c->peer.pid, err);
		reply_error(&out, status, "%s", err);
	} else if (credential_verify(d.signed_request, &c->peer, ds->cfg->require_munge,
				     ds->cfg->munge_socket, err, sizeof(err)) < 0 ||
		   !policy_may_send(&c->peer, d.request->op_case, err, sizeof(err))) {
		log_warning("refused request from uid %u pid %d: %s", (unsigned)c->peer.uid,
			    (int)c->peer.pid, err);
		reply_error(&out, SQUASH__STATUS__DENIED, "%s", err);
	} else {
		const Squash__Request *req = d.request;
		switch (req->op_case) {
		case SQUASH__REQUEST__OP_MOUNT_JOB:
			job_mounts_mount(ds, req->mount_job, &out);
			break;
		case SQUASH__REQUEST__OP_STEP_INFO:
			job_mounts_step_info(ds, &c->peer, req->step_info->job_id, &out);
			break;
		case SQUASH__REQUEST__OP_RELEASE_JOB:
			job_mounts_release(ds, req->release_job->job_id, &out);
			break;
		case SQUASH__REQUEST__OP_LIST:
			job_mounts_list(ds, &c->peer, &out);
			break;
		default:
			reply_error(&out, SQUASH__STATUS__BAD_REQUEST, "unknown request");
			break;
		}
	}
	if (squash_response_send(c->fd, &out.resp) < 0)
		log_debug("could not answer uid %u pid %d: %s", (unsigned)c->peer.uid,
			  (int)c->peer.pid, strerror(errno));
	reply_free(&out);
	squash_decoded_request_free(&d);
}

static void refuse_oversized(struct connection *c)
{
	struct reply out;
	reply_init(&out);
	log_warning("bad request from uid %u pid %d: larger than %d bytes", (unsigned)c->peer.uid,
		    (int)c->peer.pid, SQUASH_FRAME_MAX);
	reply_error(&out, SQUASH__STATUS__BAD_REQUEST, "request larger than %d bytes", SQUASH_FRAME_MAX);
	squash_response_send(c->fd, &out.resp);
}

static size_t connections_of(const struct connection *conns, size_t n, uid_t uid)
{
	size_t count = 0;
	for (size_t i = 0; i < n; i++)
		count += conns[i].peer.uid == uid;
	return count;
}

static void accept_connections(int listen_fd, struct connection *conns, size_t *n)
{
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
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
		if (*n >= MAX_CONNECTIONS ||
		    (peer.uid != 0 && connections_of(conns, *n, peer.uid) >= MAX_CONNECTIONS_PER_USER)) {
			log_warning("too many connections; dropping one from uid %u pid %d",
				    (unsigned)peer.uid, (int)peer.pid);
			close(fd);
			continue;
		}
		conns[(*n)++] = (struct connection){fd, peer, squash_now_ms() + CONNECTION_IDLE_MS};
	}
}

static void reap_children(struct daemon_state *ds)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		job_mounts_child_exited(ds, pid, status);
}

/* Returns 1 when asked to stop. */
static int handle_signal(int sfd, struct daemon_state *ds)
{
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap_children(ds);
			break;
		case SIGTERM:
		case SIGINT:
			log_info("stopping on signal %u; mounts stay for their jobs", si.ssi_signo);
			return 1;
		default:
			break;
		}
	}
	return 0;
}

int server_run(int listen_fd, struct daemon_state *ds)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGPIPE);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		log_error("signalfd: %s", strerror(errno));
		return -1;
	}
	/* Children exited before the signalfd existed. */
	reap_children(ds);

	static uint8_t buf[SQUASH_FRAME_MAX];
	struct connection conns[MAX_CONNECTIONS];
	size_t n = 0;
	int stop = 0;
	sd_notify(0, "READY=1\nSTATUS=serving");
	while (!stop) {
		struct pollfd pfd[2 + MAX_CONNECTIONS];
		pfd[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
		long long now = squash_now_ms(), wait = -1;
		for (size_t i = 0; i < n; i++) {
			pfd[2 + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
			long long left = conns[i].deadline_ms - now;
			if (wait < 0 || left < wait)
				wait = left < 0 ? 0 : left;
		}
		if (poll(pfd, 2 + n, (int)wait) < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			break;
		}
		if (pfd[0].revents & POLLIN)
			stop = handle_signal(sfd, ds);

		now = squash_now_ms();
		size_t kept = 0;
		for (size_t i = 0; i < n; i++) {
			struct connection *c = &conns[i];
			bool done = false;
			if (pfd[2 + i].revents & (POLLIN | POLLHUP | POLLERR)) {
				size_t len = 0;
				int rc = squash_frame_recv(c->fd, buf, &len, 0);
				if (rc == SQUASH_FRAME_OK)
					handle_request(ds, c, buf, len);
				else if (rc == SQUASH_FRAME_ETOOBIG)
					refuse_oversized(c);
				done = rc != SQUASH_FRAME_ETIMEDOUT;
			} else if (c->deadline_ms <= now) {
				log_debug("closing idle connection from uid %u pid %d", (unsigned)c->peer.uid,
					  (int)c->peer.pid);
				done = true;
			}
			if (done)
				close(c->fd);
			else
				conns[kept++] = *c;
		}
		n = kept;
		if (pfd[1].revents & POLLIN)
			accept_connections(listen_fd, conns, &n);
	}
	for (size_t i = 0; i < n; i++)
		close(conns[i].fd);
	close(sfd);
	sd_notify(0, "STOPPING=1");
	return 0;
}

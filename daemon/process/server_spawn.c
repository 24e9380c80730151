/* Starting a FUSE server as the job user (server_spawn.h). */
#include "config.h"

#include "process/server_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "process/child_process.h"
#include "process/reader_cgroup.h"
#include "process/server_output.h"
#include "util/close_from.h"
#include "util/log.h"

#define ARGS_MAX 1024 /* argv, NUL-separated */
#define ARGC_MAX 16

/* What the child gets: all of it in one fixed-size datagram. */
struct server_request {
	struct identity id;
	char path[PATH_MAX];
	char args[ARGS_MAX];
	uint32_t argc;
	struct reader_cgroup_join cgroup;
};

/* How long the spawner may take to make the child: it is root's and
 * waits for nothing, so only a machine out of processes is this slow. */
#define SPAWN_ANSWER_MS 5000

/* Runs in the child (the spawner's, or squashd's fork when there is no
 * spawner); never returns. Its stderr is the log pipe from the start, so
 * every failure below is in squashd's log with its reason. */
static void __attribute__((noreturn))
run_server(const struct server_request *rq, int fd3, int fd4, int log_fd)
{
	char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	char *argv[ARGC_MAX + 1];
	const char *a = rq->args;
	int img, fus, lg, devnull;

	/* Own session: signals aimed at squashd's process group (a terminal,
	 * a restart) must not take the user's mount down with it. */
	child_detach_signals();

	/* Move the descriptors above their targets first so dup2 never
	 * clobbers one with another. */
	img = fcntl(fd3, F_DUPFD_CLOEXEC, 10);
	fus = fd4 >= 0 ? fcntl(fd4, F_DUPFD_CLOEXEC, 10) : -1;
	lg = fcntl(log_fd, F_DUPFD_CLOEXEC, 10);
	if (lg < 0 || dup2(lg, STDOUT_FILENO) < 0 || dup2(lg, STDERR_FILENO) < 0)
		_exit(SERVER_EXEC_FAILED); /* nowhere to say why: squashd logs the status */
	if (img < 0 || (fd4 >= 0 && fus < 0) || dup2(img, SERVER_FD3) < 0 ||
	    (fus >= 0 && dup2(fus, SERVER_FD4) < 0)) {
		dprintf(STDERR_FILENO, "cannot set up its descriptors: %s\n", strerror(errno));
		_exit(SERVER_EXEC_FAILED);
	}
	devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0 && devnull != STDIN_FILENO) {
		dup2(devnull, STDIN_FILENO);
		close(devnull);
	}
	close_from(fus >= 0 ? SERVER_FD4 + 1 : SERVER_FD3 + 1);

	int oom = child_drop_oom_protection();
	if (oom)
		dprintf(STDERR_FILENO, "cannot reset oom_score_adj: %s\n", strerror(oom));
	/* Into the user's reader cgroup while still root: after the drop the
	 * user could no longer move it, nor keep it out. */
	char why[512];
	if (reader_cgroup_join(&rq->cgroup, why, sizeof(why)) < 0) {
		dprintf(STDERR_FILENO, "%s\n", why);
		_exit(SERVER_BECOME_FAILED);
	}

	int e = identity_become_raw(&rq->id);
	if (e) {
		dprintf(STDERR_FILENO, "cannot become user %s (uid %u): %s\n", rq->id.name,
			(unsigned)rq->id.uid, strerror(e));
		_exit(SERVER_BECOME_FAILED);
	}
	for (uint32_t i = 0; i < rq->argc && i < ARGC_MAX; i++) {
		argv[i] = (char *)a;
		a += strnlen(a, (size_t)(rq->args + sizeof(rq->args) - a)) + 1;
	}
	argv[rq->argc < ARGC_MAX ? rq->argc : ARGC_MAX] = NULL;
	execve(rq->path, argv, envp);
	dprintf(STDERR_FILENO, "cannot run %s: %s\n", rq->path, strerror(errno));
	_exit(SERVER_EXEC_FAILED);
}

/* In the spawner's child: checks what it was given (a fixed-size request
 * from squashd itself), then runs the server. fds: the log pipe; fd3
 * and maybe fd4 come from squashd on sock, never through the spawner
 * (spawner.h: fd3 may be a user's image on a FUSE mount). */
static void __attribute__((noreturn))
spawned_server(int sock, const void *payload, const int *fds, size_t nfds)
{
	static struct server_request rq; /* a fresh process: ours alone */

	int own[2], n = spawner_child_fds(sock, own, 2);

	close(sock); /* the spawner answers squashd; the child has nothing more to say */
	memcpy(&rq, payload, sizeof(rq));
	rq.path[sizeof(rq.path) - 1] = '\0';
	rq.args[sizeof(rq.args) - 1] = '\0';
	for (size_t i = 0; i < READER_CGROUP_FILES; i++)
		rq.cgroup.dirs[i][sizeof(rq.cgroup.dirs[i]) - 1] = '\0';
	rq.cgroup.slice[sizeof(rq.cgroup.slice) - 1] = '\0';
	if (nfds < 1 || n < 1 || rq.id.ngroups < 0 || rq.id.ngroups > IDENTITY_MAX_GROUPS ||
	    rq.argc == 0 || rq.argc > ARGC_MAX)
		_exit(SERVER_EXEC_FAILED);
	run_server(&rq, own[0], n > 1 ? own[1] : -1, fds[0]);
}

const struct spawner_op server_spawner_op = { sizeof(struct server_request), spawned_server, 1,
					      true };

static int fill_request(struct server_request *rq, const struct identity *id, const char *path,
			char *const *argv)
{
	size_t used = 0;

	memset(rq, 0, sizeof(*rq));
	rq->id = *id;
	if (strlen(path) >= sizeof(rq->path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(rq->path, path);
	for (; argv[rq->argc]; rq->argc++) {
		size_t len = strlen(argv[rq->argc]) + 1;

		if (rq->argc == ARGC_MAX || used + len > sizeof(rq->args)) {
			errno = E2BIG;
			return -1;
		}
		memcpy(rq->args + used, argv[rq->argc], len);
		used += len;
	}
	if (reader_cgroup_prepare(id->uid, &rq->cgroup) < 0)
		return -1; /* logged */
	return 0;
}


pid_t server_spawn(int fd3, int fd4, const struct identity *id, const char *path,
		   char *const *argv, int *pidfd)
{
	struct server_request *rq = malloc(sizeof(*rq));
	int logp[2] = { -1, -1 }, sv[2] = { -1, -1 }, saved;
	pid_t pid = -1;

	*pidfd = -1;
	if (!rq || fill_request(rq, id, path, argv) < 0 || pipe2(logp, O_CLOEXEC) < 0)
		goto out;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
		int fds[2] = { sv[1], logp[1] }, own[2] = { fd3, fd4 };

		if (spawner_request_fds(SPAWNER_START_SERVER, rq, sizeof(*rq), fds, 2) == 0) {
			close(sv[1]);
			sv[1] = -1;
			/* Straight to the child: the spawner never holds them. */
			if (spawner_send_child_fds(sv[0], own, fd4 >= 0 ? 2 : 1) < 0)
				log_warning("cannot hand %s its descriptors: %s", path, strerror(errno));
			pid = spawner_receive_pidfd(sv[0], SPAWN_ANSWER_MS, pidfd);
			goto out;
		}
	}
	/* No spawner: fork here (the child is single-threaded after fork). */
	pid = child_fork(pidfd);
	if (pid == 0)
		run_server(rq, fd3, fd4, logp[1]);
out:
	saved = errno;
	if (logp[1] >= 0)
		close(logp[1]);
	if (pid > 0)
		server_output_watch(logp[0], *pidfd, pid, id->uid, path);
	else if (logp[0] >= 0)
		close(logp[0]);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	free(rq);
	if (pid < 0)
		log_error("cannot start %s as user %s (uid %u): %s", path, id->name,
			  (unsigned)id->uid, strerror(saved));
	errno = saved;
	return pid;
}

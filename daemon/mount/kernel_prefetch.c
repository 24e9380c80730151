/* squash-reader --prefetch after a kernel mount (kernel_prefetch.h). */
#include "config.h"

#include "mount/kernel_prefetch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "process/child_process.h"
#include "process/identity.h"
#include "util/close_from.h"
#include "util/log.h"

struct prefetch_request {
	char reader[PATH_MAX];
	char mount_point[PATH_MAX]; /* its root walked too ("": not) */
};

/* In the spawner's child; never returns. The image comes from squashd on
 * sock, never through the spawner (spawner.h). */
static void __attribute__((noreturn))
spawned_prefetch(int sock, const void *payload, const int *fds, size_t nfds)
{
	static struct prefetch_request rq; /* a fresh process: ours alone */
	static const struct identity nobody = { .uid = IDENTITY_NOBODY, .gid = IDENTITY_NOBODY,
						.ngroups = 0, .name = "nobody" };
	char *const envp[] = { NULL };
	int img, devnull, own, held, root = -1;

	(void)fds;
	(void)nfds;
	int got = spawner_child_fds(sock, &own, 1);
	memcpy(&rq, payload, sizeof(rq));
	rq.reader[sizeof(rq.reader) - 1] = '\0';
	rq.mount_point[sizeof(rq.mount_point) - 1] = '\0';
	if (got < 1 || rq.reader[0] != '/')
		_exit(2);
	child_detach_signals();
	/* Gone, even stuck in a hung file system's read, after its time
	 * (SIGALRM's default ends it); from before anything may wait. */
	alarm(KERNEL_PREFETCH_MAX_S);
	/* The answer socket stays open until this process ends: squashd
	 * counts it running until then (kernel_prefetch.h). All above the
	 * descriptors they go to. */
	held = fcntl(sock, F_DUPFD, 10);
	img = fcntl(own, F_DUPFD, 10);
	/* The mount's root, opened as root: its directory's mode is 0700. */
	if (rq.mount_point[0] == '/') {
		int r = open(rq.mount_point, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		root = r >= 0 ? fcntl(r, F_DUPFD, 10) : -1;
	}
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	devnull = null_fd >= 0 ? fcntl(null_fd, F_DUPFD, 10) : -1;
	if (held < 0 || img < 0 || devnull < 0 || dup2(img, 3) < 0 || dup2(held, 4) < 0 ||
	    (root >= 0 && dup2(root, 5) < 0))
		_exit(2);
	for (int i = 0; i < 3; i++)
		dup2(devnull, i);
	close_from(root >= 0 ? 6 : 5);
	if (child_drop_oom_protection() != 0)
		_exit(2);
	/* Behind the node's real work. */
	setpriority(PRIO_PROCESS, 0, 10);
	if (identity_become_raw(&nobody) != 0)
		_exit(2);
	if (root >= 0)
		execve(rq.reader,
		       (char *const[]){ rq.reader, (char *)"--prefetch", (char *)"/dev/fd/3", (char *)"--walk",
					(char *)"/dev/fd/5", NULL },
		       envp);
	execve(rq.reader, (char *const[]){ rq.reader, (char *)"--prefetch", (char *)"/dev/fd/3", NULL },
	       envp);
	_exit(2);
}

const struct spawner_op kernel_prefetch_spawner_op = { sizeof(struct prefetch_request),
						       spawned_prefetch, 0, false };

int kernel_prefetch_start(const char *reader_path, int image_fd, const char *mount_point)
{
	static const struct prefetch_request zero;
	struct prefetch_request r = zero;
	int sv[2];

	if (strlen(reader_path) >= sizeof(r.reader))
		return -1;
	if (mount_point && strlen(mount_point) < sizeof(r.mount_point))
		snprintf(r.mount_point, sizeof(r.mount_point), "%s", mount_point);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_debug("no start profile read ahead: socketpair: %s", strerror(errno));
		return -1;
	}
	snprintf(r.reader, sizeof(r.reader), "%s", reader_path);
	/* The image straight to the child, queued before the request: the
	 * spawner never holds it (spawner.h). It stays queued after our end
	 * closes, for the child to take. */
	if (spawner_send_child_fds(sv[0], &image_fd, 1) < 0 ||
	    spawner_request_fds(SPAWNER_KERNEL_PREFETCH, &r, sizeof(r), &sv[1], 1) < 0) {
		log_debug("no start profile read ahead: no spawner");
		close(sv[0]);
		sv[0] = -1;
	}
	close(sv[1]);
	return sv[0];
}

int kernel_prefetch_pidfd(int held, int timeout_ms)
{
	int pidfd;

	return spawner_receive_pidfd(held, timeout_ms, &pidfd) > 0 ? pidfd : -1;
}

bool kernel_prefetch_ended(int held)
{
	struct pollfd p = { .fd = held, .events = 0 };

	/* POLLHUP once every copy of the child's end is closed: the spawner's
	 * after the fork, the process's at its exit. */
	return poll(&p, 1, 0) != 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

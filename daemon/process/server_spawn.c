/* Starting a FUSE server as the job user (server_spawn.h). */
#include "config.h"

#include "process/server_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "process/child_process.h"
#include "util/log.h"

static void close_from(int lowfd)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
		return;
#endif
	long max = sysconf(_SC_OPEN_MAX);

	if (max < 0 || max > 65536)
		max = 65536;
	for (int fd = lowfd; fd < max; fd++)
		close(fd);
}

/* What the server child gets; its arguments are made before it runs. */
struct server_exec {
	int fd3, fd4;
	const struct identity *id;
	const char *path;
	char *const *argv;
	int failed;	/* set by the child: SERVER_BECOME_FAILED or SERVER_EXEC_FAILED */
	int err;	/* and the errno */
};

/* Runs in the server child, which shares squashd's memory until it execs
 * (child_vfork): plain system calls only, nothing that takes a lock or
 * allocates, and the identity is dropped with raw system calls. */
static int exec_server(void *arg)
{
	struct server_exec *x = arg;
	char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
			       NULL };
	struct sigaction dfl;
	sigset_t none;
	int img, fus, devnull;

	/* Own session: signals aimed at squashd's process group (a terminal,
	 * a restart) must not take the user's mount down with it. */
	setsid();
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* Move both descriptors above the targets first so dup2 never
	 * clobbers one with the other. */
	img = fcntl(x->fd3, F_DUPFD_CLOEXEC, SERVER_FD4 + 1);
	fus = x->fd4 >= 0 ? fcntl(x->fd4, F_DUPFD_CLOEXEC, SERVER_FD4 + 1) : -1;
	if (img < 0 || (x->fd4 >= 0 && fus < 0) || dup2(img, SERVER_FD3) < 0 ||
	    (fus >= 0 && dup2(fus, SERVER_FD4) < 0)) {
		x->err = errno;
		x->failed = SERVER_EXEC_FAILED;
		return SERVER_EXEC_FAILED;
	}
	devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0 && devnull != STDIN_FILENO) {
		dup2(devnull, STDIN_FILENO);
		close(devnull);
	}
	close_from(fus >= 0 ? SERVER_FD4 + 1 : SERVER_FD3 + 1);

	int e = identity_become_raw(x->id);
	if (e) {
		x->err = e;
		x->failed = SERVER_BECOME_FAILED;
		return SERVER_BECOME_FAILED;
	}
	execve(x->path, x->argv, envp);
	x->err = errno;
	x->failed = SERVER_EXEC_FAILED;
	return SERVER_EXEC_FAILED;
}

pid_t server_spawn(int fd3, int fd4, const struct identity *id, const char *path,
			char *const *argv, int *pidfd)
{
	struct server_exec x = { .fd3 = fd3, .fd4 = fd4, .id = id, .path = path,
				 .argv = argv };
	pid_t pid = child_vfork(exec_server, &x, pidfd);

	/* The child has exec'd or exited: what it wrote is ours to read. */
	if (pid > 0 && x.failed == SERVER_BECOME_FAILED)
		log_error("FUSE server cannot become user %s (uid %u): %s", id->name,
			  (unsigned)id->uid, strerror(x.err));
	else if (pid > 0 && x.failed)
		log_error("cannot run %s: %s", path, strerror(x.err));
	return pid;
}

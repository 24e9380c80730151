#include "config.h"

#include "process/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "util/log.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static int stop_fd = -1;

void child_set_stop_fd(int fd)
{
	stop_fd = fd;
}

int child_stop_fd(void)
{
	return stop_fd;
}

int child_pidfd(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

bool child_exited(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return pidfd < 0 || poll(&p, 1, 0) != 0;
}

pid_t child_fork(int *pidfd)
{
	pid_t pid = fork();

	if (pid <= 0) {
		*pidfd = -1;
		return pid;
	}
	*pidfd = child_pidfd(pid);
	if (*pidfd < 0) {
		int saved = errno;

		/* Without a pidfd we cannot wait for it safely: do not let it run. */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		errno = saved;
		return -1;
	}
	return pid;
}

void child_kill(int pidfd)
{
	if (pidfd >= 0)
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

/* Reaps the exited process behind pidfd when it is our child. */
static int reap(int pidfd, int *status)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	for (;;) {
		if (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | WNOHANG) == 0)
			break;
		if (errno == EINTR)
			continue;
		if (status)
			*status = -1; /* not our child (adopted), or already reaped */
		return 1;
	}
	if (si.si_pid == 0)
		return 0; /* not yet (the poll said it exited; cannot happen) */
	if (status)
		*status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8
						   : (si.si_status & 0x7f);
	return 1;
}

int child_wait_readable(int fd, long long deadline_ms)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = fd, .events = POLLIN },
			{ .fd = stop_fd, .events = POLLIN },
		};
		long long left = deadline_ms - squash_now_ms();
		int r;

		if (left < 0)
			left = 0;
		r = poll(p, stop_fd >= 0 ? 2 : 1, (int)(left > 60000 ? 60000 : left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			return 1;
		if (r > 0 && (p[1].revents & POLLIN))
			return -1;
		if (squash_now_ms() >= deadline_ms)
			return 0;
	}
}

int child_wait(int pidfd, long long deadline_ms, int *status)
{
	for (;;) {
		int r = child_wait_readable(pidfd, deadline_ms);

		if (r != 1)
			return 0;
		if (reap(pidfd, status))
			return 1;
	}
}

void child_detach_signals(void)
{
	struct sigaction dfl;
	sigset_t none;

	setsid();
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int child_drop_oom_protection(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC), e = 0;

	if (fd < 0)
		return errno;
	if (write(fd, "0", 1) != 1)
		e = errno ? errno : EIO;
	close(fd);
	return e;
}

#include "config.h"

#include "mount/mount_fuse.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mount/child_process.h"
#include "clock.h"
#include "util/log.h"

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

/* Descriptor numbers the server sees; fixed so its argv is predictable. */
#define SERVER_IMAGE_FD 3
#define SERVER_FUSE_FD 4

/* Server exit codes for failures before exec (the server never uses
 * these for its own errors: squashfuse_ll exits 1 on a bad image). */
#define EXIT_BECOME_FAILED 126
#define EXIT_EXEC_FAILED 127

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

/* Runs in the forked server child, never returns. */
static void __attribute__((noreturn))
exec_server(int image_fd, int fuse_fd, const struct identity *id,
	    const char *squashfuse_path, bool resume)
{
	char image_arg[32], fuse_arg[32];
	char *const argv[] = { (char *)"squashfuse_ll", (char *)"-f", image_arg,
			       fuse_arg, NULL };
	char *const resume_argv[] = { (char *)"squash-reader", (char *)"--resume", image_arg,
				      fuse_arg, NULL };
	char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
			       NULL };
	sigset_t all;
	int img, fus, devnull;

	/* Own session: signals aimed at squashd's process group (a terminal,
	 * a restart) must not take the user's mount down with it. */
	setsid();
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);

	/* Move both descriptors above the targets first so dup2 never
	 * clobbers one with the other. */
	img = fcntl(image_fd, F_DUPFD_CLOEXEC, SERVER_FUSE_FD + 1);
	fus = fcntl(fuse_fd, F_DUPFD_CLOEXEC, SERVER_FUSE_FD + 1);
	if (img < 0 || fus < 0 || dup2(img, SERVER_IMAGE_FD) < 0 ||
	    dup2(fus, SERVER_FUSE_FD) < 0) {
		dprintf(STDERR_FILENO, "squashd: error: FUSE server setup: %s\n",
			strerror(errno));
		_exit(EXIT_EXEC_FAILED);
	}
	devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0 && devnull != STDIN_FILENO) {
		dup2(devnull, STDIN_FILENO);
		close(devnull);
	}
	close_from(SERVER_FUSE_FD + 1);

	if (identity_become(id) < 0) {
		dprintf(STDERR_FILENO,
			"squashd: error: FUSE server cannot become user %s (uid %u): %s\n",
			id->name, (unsigned)id->uid, strerror(errno));
		_exit(EXIT_BECOME_FAILED);
	}
	snprintf(image_arg, sizeof(image_arg), "/dev/fd/%d", SERVER_IMAGE_FD);
	snprintf(fuse_arg, sizeof(fuse_arg), "/dev/fd/%d", SERVER_FUSE_FD);
	execve(squashfuse_path, resume ? resume_argv : argv, envp);
	dprintf(STDERR_FILENO, "squashd: error: cannot run %s: %s\n",
		squashfuse_path, strerror(errno));
	_exit(EXIT_EXEC_FAILED);
}

/* Runs in the forked probe child: the first request the server answers
 * proves the mount works. Exit status 0, or the errno that failed. A
 * server that never answers is handled by the parent killing us. */
static void __attribute__((noreturn)) probe(const char *mountpoint)
{
	struct statfs sfs;
	struct stat st;

	if (statfs(mountpoint, &sfs) < 0 || stat(mountpoint, &st) < 0)
		_exit(errno > 0 && errno < 256 ? errno : EIO);
	if ((unsigned long)sfs.f_type != FUSE_SUPER_MAGIC)
		_exit(255); /* something else is mounted there */
	_exit(0);
}

/* Kills and reaps a child without waiting for it: one stuck in the kernel
 * is reaped by the process watcher whenever it exits. */
static void kill_and_forget(int pidfd)
{
	child_abandon(pidfd);
}

static void describe_server_exit(int status, const char *squashfuse_path,
				 enum result *res, char *err, size_t errlen)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_BECOME_FAILED) {
		snprintf(err, errlen,
			 "the FUSE server could not switch to the job user (see squashd's log)");
		*res = RESULT_NODE_ERROR;
	} else if (WIFEXITED(status) &&
		   WEXITSTATUS(status) == EXIT_EXEC_FAILED) {
		snprintf(err, errlen, "cannot run %s (see squashd's log)",
			 squashfuse_path);
		*res = RESULT_NODE_ERROR;
	} else if (WIFEXITED(status)) {
		snprintf(err, errlen,
			 "squashfuse_ll could not read the image: exit status %d",
			 WEXITSTATUS(status));
		*res = RESULT_USER_ERROR;
	} else {
		snprintf(err, errlen, "squashfuse_ll was killed by signal %d",
			 WTERMSIG(status));
		*res = RESULT_NODE_ERROR;
	}
}

/* Waits until the mount answers, the server dies, or the deadline: woken
 * by either child's exit, never by polling. On return the probe is gone;
 * *server_gone tells whether the server was reaped. */
static enum result wait_ready(const char *mountpoint, int server_pidfd,
			      const char *squashfuse_path, long long deadline,
			      int timeout_ms, bool *server_gone, char *err,
			      size_t errlen)
{
	enum result res = RESULT_NODE_ERROR;
	int status = 0, pstatus = 0, probe_pidfd, stop = child_stop_fd();
	pid_t prober;
	bool probe_done = false;

	prober = child_fork(&probe_pidfd);
	if (prober < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return RESULT_NODE_ERROR;
	}
	if (prober == 0)
		probe(mountpoint);

	while (!probe_done) {
		struct pollfd p[3] = {
			{ .fd = server_pidfd, .events = POLLIN },
			{ .fd = probe_pidfd, .events = POLLIN },
			{ .fd = stop, .events = POLLIN },
		};
		long long left = deadline - squash_now_ms();
		int r;

		if (left <= 0) {
			kill_and_forget(probe_pidfd);
			snprintf(err, errlen,
				 "squashfuse_ll did not answer within %.1f s",
				 timeout_ms / 1000.0);
			return RESULT_NODE_ERROR;
		}
		r = poll(p, stop >= 0 ? 3 : 2, (int)left);
		if (r < 0 && errno != EINTR) {
			kill_and_forget(probe_pidfd);
			snprintf(err, errlen, "poll: %s", strerror(errno));
			return RESULT_NODE_ERROR;
		}
		if (r <= 0)
			continue;
		if (p[0].revents & (POLLIN | POLLHUP)) {
			child_wait(server_pidfd, 0, &status);
			*server_gone = true;
			kill_and_forget(probe_pidfd);
			describe_server_exit(status, squashfuse_path, &res, err, errlen);
			return res;
		}
		if (p[1].revents & (POLLIN | POLLHUP)) {
			child_wait(probe_pidfd, 0, &pstatus);
			close(probe_pidfd);
			probe_done = true;
		} else if (p[2].revents & POLLIN) {
			kill_and_forget(probe_pidfd);
			snprintf(err, errlen, "squashd is stopping");
			return RESULT_NODE_ERROR;
		}
	}

	if (WIFEXITED(pstatus) && WEXITSTATUS(pstatus) == 0)
		return RESULT_OK;

	/* The probe failed; a server that is exiting explains why better. */
	if (child_wait(server_pidfd, squash_now_ms() + 200, &status) == 1) {
		*server_gone = true;
		describe_server_exit(status, squashfuse_path, &res, err, errlen);
		return res;
	}
	if (WIFEXITED(pstatus) && WEXITSTATUS(pstatus) == 255) {
		snprintf(err, errlen, "%s is not the FUSE mount just made",
			 mountpoint);
		return RESULT_NODE_ERROR;
	}
	if (WIFEXITED(pstatus)) {
		int e = WEXITSTATUS(pstatus);

		/* A live server failing the first request cannot read the
		 * image's root directory: the image is damaged (squashfuse_ll
		 * only reads the superblock before serving). */
		if (e == ENOMEM || e == ENOTCONN || e == EINTR) {
			snprintf(err, errlen, "FUSE mount check failed: %s",
				 strerror(e));
			return RESULT_NODE_ERROR;
		}
		snprintf(err, errlen,
			 "squashfuse_ll could not read the image's root directory (damaged image?): %s",
			 strerror(e));
		return RESULT_USER_ERROR;
	}
	snprintf(err, errlen, "FUSE probe was killed by signal %d",
		 WTERMSIG(pstatus));
	return RESULT_NODE_ERROR;
}

bool fuse_kernel_resends(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	/* FUSE_NOTIFY_RESEND came with Linux 6.9. */
	return uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 &&
	       (major > 6 || (major == 6 && minor >= 9));
}

enum result fuse_restart_server(int conn_fd, int image_fd, const struct identity *id,
				const char *reader_path, pid_t *server_pid, int *server_pidfd,
				char *err, size_t errlen)
{
	pid_t server = child_fork(server_pidfd);

	if (server < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return RESULT_NODE_ERROR;
	}
	if (server == 0)
		exec_server(image_fd, conn_fd, id, reader_path, true);
	*server_pid = server;
	return RESULT_OK;
}

enum result fuse_mount_image(int image_fd, const char *mountpoint,
			     const struct identity *id,
			     const char *squashfuse_path, int timeout_ms,
			     pid_t *server_pid, int *server_pidfd, char *err,
			     size_t errlen)
{
	return fuse_mount_image_kept(image_fd, mountpoint, id, squashfuse_path, timeout_ms,
				     server_pid, server_pidfd, NULL, err, errlen);
}

enum result fuse_mount_image_kept(int image_fd, const char *mountpoint,
				  const struct identity *id,
				  const char *squashfuse_path, int timeout_ms,
				  pid_t *server_pid, int *server_pidfd, int *conn_fd,
				  char *err, size_t errlen)
{
	long long deadline = squash_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	char opts[256];
	bool server_gone = false;
	enum result res;
	int fuse_fd, pidfd;
	pid_t server;

	*server_pid = 0;
	*server_pidfd = -1;
	if (conn_fd)
		*conn_fd = -1;
	fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fuse_fd < 0) {
		snprintf(err, errlen, "cannot open /dev/fuse: %s", strerror(errno));
		return RESULT_NODE_ERROR;
	}
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=%u,group_id=%u,allow_other,default_permissions",
		 fuse_fd, (unsigned)id->uid, (unsigned)id->gid);
	if (mount("squashfuse", mountpoint, "fuse.squashfuse",
		  MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0) {
		snprintf(err, errlen, "cannot mount FUSE on %s: %s", mountpoint,
			 strerror(errno));
		close(fuse_fd);
		return RESULT_NODE_ERROR;
	}

	server = child_fork(&pidfd);
	if (server < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(fuse_fd);
		umount2(mountpoint, MNT_DETACH);
		return RESULT_NODE_ERROR;
	}
	if (server == 0)
		exec_server(image_fd, fuse_fd, id, squashfuse_path, false);

	/* Unless the caller keeps the connection to restart a reader that
	 * dies (conn_fd), only the server may hold /dev/fuse: if it dies the
	 * kernel then aborts the connection instead of leaving callers
	 * hanging. */
	if (!conn_fd)
		close(fuse_fd);

	res = wait_ready(mountpoint, pidfd, squashfuse_path, deadline,
			 timeout_ms, &server_gone, err, errlen);
	if (res != RESULT_OK) {
		if (umount2(mountpoint, MNT_DETACH) < 0 && errno != EINVAL)
			log_warning("detaching failed FUSE mount %s: %s",
				    mountpoint, strerror(errno));
		if (server_gone)
			close(pidfd);
		else
			kill_and_forget(pidfd);
		if (conn_fd)
			close(fuse_fd);
		return res;
	}
	*server_pid = server;
	*server_pidfd = pidfd;
	if (conn_fd)
		*conn_fd = fuse_fd;
	log_debug("FUSE mount %s served by %s pid %d as uid %u", mountpoint,
		  squashfuse_path, (int)server, (unsigned)id->uid);
	return RESULT_OK;
}

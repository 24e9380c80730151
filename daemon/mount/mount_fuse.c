#include "config.h"

#include "mount/mount_fuse.h"
#include "mount/fuse_abort.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "process/child_process.h"
#include "mount/fuse_probe.h"
#include "mount/reader_pool.h"
#include "process/server_spawn.h"
#include "clock.h"
#include "util/log.h"

/* Starts a server of its own for one mount. */
static pid_t start_server(int image_fd, int fuse_fd, const struct identity *id,
			  const char *squashfuse_path, int *pidfd)
{
	char image_arg[32], fuse_arg[32];
	char *const argv[] = { (char *)"squashfuse_ll", (char *)"-f", image_arg,
			       fuse_arg, NULL };

	snprintf(image_arg, sizeof(image_arg), "/dev/fd/%d", SERVER_FD3);
	snprintf(fuse_arg, sizeof(fuse_arg), "/dev/fd/%d", SERVER_FD4);
	return server_spawn(image_fd, fuse_fd, id, squashfuse_path, argv, pidfd);
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
	if (WIFEXITED(status) && WEXITSTATUS(status) == SERVER_BECOME_FAILED) {
		snprintf(err, errlen,
			 "the FUSE server could not switch to the job user (see squashd's log)");
		*res = RESULT_NODE_ERROR;
	} else if (WIFEXITED(status) &&
		   WEXITSTATUS(status) == SERVER_EXEC_FAILED) {
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
	int status = 0, pstatus = 0, stop = child_stop_fd();
	struct fuse_probe probe;
	bool probe_done = false;

	if (fuse_probe_start(&probe, mountpoint) < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return RESULT_NODE_ERROR;
	}

	while (!probe_done) {
		struct pollfd p[3] = {
			{ .fd = server_pidfd, .events = POLLIN },
			{ .fd = probe.fd, .events = POLLIN },
			{ .fd = stop, .events = POLLIN },
		};
		long long left = deadline - squash_now_ms();
		int r;

		if (left <= 0) {
			fuse_probe_abandon(&probe);
			snprintf(err, errlen,
				 "squashfuse_ll did not answer within %.1f s",
				 timeout_ms / 1000.0);
			return RESULT_NODE_ERROR;
		}
		r = poll(p, stop >= 0 ? 3 : 2, (int)left);
		if (r < 0 && errno != EINTR) {
			fuse_probe_abandon(&probe);
			snprintf(err, errlen, "poll: %s", strerror(errno));
			return RESULT_NODE_ERROR;
		}
		if (r <= 0)
			continue;
		if (p[0].revents & (POLLIN | POLLHUP)) {
			child_wait(server_pidfd, 0, &status);
			*server_gone = true;
			fuse_probe_abandon(&probe);
			describe_server_exit(status, squashfuse_path, &res, err, errlen);
			return res;
		}
		if (p[1].revents & (POLLIN | POLLHUP)) {
			probe_done = fuse_probe_done(&probe, &pstatus) == 1;
		} else if (p[2].revents & POLLIN) {
			fuse_probe_abandon(&probe);
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

enum result fuse_restart_server(int conn_fd, const int *image_fds, size_t n,
				const struct identity *id, const char *reader_path,
				pid_t *server_pid, int *server_pidfd, char *err, size_t errlen)
{
	/* The user's reader takes it over; not waited for (see reader_pool.h). */
	if (n > 1)
		return reader_pool_serve_union(id, reader_path, image_fds, n, conn_fd, true, 0,
					       server_pid, server_pidfd, err, errlen);
	return reader_pool_serve(id, reader_path, image_fds[0], conn_fd, -1, true, 0, server_pid,
				 server_pidfd, err, errlen);
}

/* Opens /dev/fuse and mounts that connection at mountpoint for id: its
 * descriptor, or -1 with err. */
static int mount_connection(const char *mountpoint, const struct identity *id, char *err,
			    size_t errlen)
{
	char opts[256];
	int fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fuse_fd < 0) {
		snprintf(err, errlen, "cannot open /dev/fuse: %s", strerror(errno));
		return -1;
	}
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=%u,group_id=%u,allow_other,default_permissions",
		 fuse_fd, (unsigned)id->uid, (unsigned)id->gid);
	if (mount("squashfuse", mountpoint, "fuse.squashfuse",
		  MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0) {
		snprintf(err, errlen, "cannot mount FUSE on %s: %s", mountpoint,
			 strerror(errno));
		close(fuse_fd);
		return -1;
	}
	return fuse_fd;
}

enum result fuse_mount_union_kept(const int *image_fds, size_t n, const char *mountpoint,
				  const struct identity *id, const char *reader_path,
				  int timeout_ms, pid_t *server_pid, int *server_pidfd,
				  int *conn_fd, char *err, size_t errlen)
{
	long long deadline = squash_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int fuse_fd = mount_connection(mountpoint, id, err, errlen);
	enum result res;

	*server_pid = 0;
	*server_pidfd = -1;
	if (conn_fd)
		*conn_fd = -1;
	if (fuse_fd < 0)
		return RESULT_NODE_ERROR;
	/* The reader answers once it has read every image and attached the
	 * session (reader/serve.c): the mount is ready then. */
	res = reader_pool_serve_union(id, reader_path, image_fds, n, fuse_fd, false, deadline,
				      server_pid, server_pidfd, err, errlen);
	if (res != RESULT_OK || !conn_fd)
		close(fuse_fd);
	if (res != RESULT_OK) {
		umount2(mountpoint, MNT_DETACH);
		return res;
	}
	if (conn_fd)
		*conn_fd = fuse_fd;
	log_debug("FUSE union of %zu images at %s served by %s pid %d as uid %u", n, mountpoint,
		  reader_path, (int)*server_pid, (unsigned)id->uid);
	return RESULT_OK;
}

enum result fuse_mount_image(int image_fd, const char *mountpoint,
			     const struct identity *id,
			     const char *squashfuse_path, int timeout_ms,
			     pid_t *server_pid, int *server_pidfd, char *err,
			     size_t errlen)
{
	return fuse_mount_image_kept(image_fd, mountpoint, id, squashfuse_path, false, timeout_ms,
				     server_pid, server_pidfd, NULL, err, errlen);
}

enum result fuse_mount_image_kept(int image_fd, const char *mountpoint,
				  const struct identity *id,
				  const char *squashfuse_path, bool pooled, int timeout_ms,
				  pid_t *server_pid, int *server_pidfd, int *conn_fd,
				  char *err, size_t errlen)
{
	long long deadline = squash_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	bool server_gone = false;
	enum result res;
	int fuse_fd, pidfd;
	pid_t server;

	*server_pid = 0;
	*server_pidfd = -1;
	if (conn_fd)
		*conn_fd = -1;
	fuse_fd = mount_connection(mountpoint, id, err, errlen);
	if (fuse_fd < 0)
		return RESULT_NODE_ERROR;

	if (pooled) {
		/* The new mount's root (O_PATH), for the reader to walk the
		 * image's start profile through (reader/start_profile.h).
		 * Nothing asks the FUSE server for it: the walk ends at the
		 * mount's root, which the kernel made at mount. Not a detached
		 * copy (open_tree): the user, who may ptrace the reader, could
		 * attach that in a namespace of their own and change its
		 * flags; through this one they reach what the path reaches, and
		 * ".." the 0700 mount directory. */
		int root = open(mountpoint, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		res = reader_pool_serve(id, squashfuse_path, image_fd, fuse_fd, root, false, deadline,
					&server, &pidfd, err, errlen);
		if (root >= 0)
			close(root);
		if (res != RESULT_OK) {
			close(fuse_fd);
			umount2(mountpoint, MNT_DETACH);
			return res;
		}
	} else {
		server = start_server(image_fd, fuse_fd, id, squashfuse_path, &pidfd);
		if (server < 0) {
			snprintf(err, errlen, "fork: %s", strerror(errno));
			close(fuse_fd);
			umount2(mountpoint, MNT_DETACH);
			return RESULT_NODE_ERROR;
		}
	}

	/* Unless the caller keeps the connection to restart a reader that
	 * dies (conn_fd), only the server may hold /dev/fuse: if it dies the
	 * kernel then aborts the connection instead of leaving callers
	 * hanging. */
	if (!conn_fd)
		close(fuse_fd);

	/* A pooled reader answers only once it has read the image's root
	 * and attached its session (reader/serve.c): the mount is ready, and
	 * the probe (a child asking over the mount) would only repeat that.
	 * So only a server of its own is waited for, and killed on failure. */
	res = pooled ? RESULT_OK
		     : wait_ready(mountpoint, pidfd, squashfuse_path, deadline, timeout_ms,
				  &server_gone, err, errlen);
	if (res != RESULT_OK) {
		/* The probe may wait on it still (fuse_abort.h). */
		fuse_abort_mount(mountpoint);
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

#include "config.h"
#include "core/fuse_servers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount/process_watch.h"
#include "util/log.h"

struct server_watch {
	struct daemon_state *ds;
	unsigned mount_id;
};

static void describe_death(int status, char *buf, size_t len)
{
	if (status < 0)
		snprintf(buf, len, "exited (it was adopted after a squashd restart; its status is unknown)");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

void fuse_servers_mark_dead_locked(struct daemon_state *ds, struct mount_entry *m, const char *how)
{
	char path[PATH_MAX];

	log_error("FUSE server of image %s (pid %d) %s; its mount %s is dead%s",
		  m->image, (int)m->server_pid, how, m->mount_point,
		  m->refcount ? " and is replaced for new jobs" : "");
	free(m->failure);
	m->failure = strdup(how);
	m->state = MOUNT_DEAD;
	m->server_pid = 0;
	if (m->server_pidfd >= 0)
		close(m->server_pidfd);
	m->server_pidfd = -1;
	snprintf(path, sizeof(path), "%s", m->mount_point);
	/* A dead FUSE mount answers ENOTCONN: detaching it does not block. */
	if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
		log_warning("detaching dead mount %s: %s", path, strerror(errno));
	if (m->refcount == 0) {
		rmdir(path);
		registry_remove_mount(&ds->registry, m);
	}
	daemon_save_locked(ds);
}

static void server_exited(void *arg, pid_t pid, int status)
{
	struct server_watch *w = arg;
	struct daemon_state *ds = w->ds;
	char how[128];

	describe_death(status, how, sizeof(how));
	pthread_mutex_lock(&ds->lock);
	struct mount_entry *m = registry_mount_by_id(&ds->registry, w->mount_id);
	/* A server that exits because its mount is being torn down is expected. */
	if (m && (m->state == MOUNT_READY || m->state == MOUNT_LINGERING) && m->server_pid == pid)
		fuse_servers_mark_dead_locked(ds, m, how);
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
	free(w);
}

void fuse_servers_watch_locked(struct daemon_state *ds, struct mount_entry *m)
{
	struct server_watch *w = malloc(sizeof(*w));
	int fd = m->server_pidfd >= 0 ? fcntl(m->server_pidfd, F_DUPFD_CLOEXEC, 0) : -1;

	if (w && fd >= 0) {
		*w = (struct server_watch){ ds, m->id };
		if (process_watch_add(fd, m->server_pid, server_exited, w) == 0)
			return;
	}
	log_warning("cannot watch the FUSE server of %s (pid %d); its death will go unnoticed",
		    m->mount_point, (int)m->server_pid);
	free(w);
	if (fd >= 0)
		close(fd);
}

#include "config.h"
#include "core/fuse_servers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "mount/fuse_keep.h"
#include "process/child_process.h"
#include "process/process_watch.h"
#include "process/reader_cgroup.h"
#include "process/reader_cgroup_usage.h"
#include "mount/reader_pool.h"
#include "util/log.h"

/* One watch per server process, which may serve several mounts (one
 * user's squash-reader serves all of theirs). */
struct server_watch {
	struct daemon_state *ds;
	pid_t pid;
	uid_t uid;
	struct server_watch *next;
	/* Which process pid was: its death is handled on its user's thread,
	 * which that user may keep busy, and meanwhile another user's new
	 * reader may get the same pid. Only what is still this process's
	 * (its pidfd exited) is acted on. */
	int pidfd;
};

static struct server_watch *watched; /* under ds->lock */

static void describe_death(int status, uid_t uid, char *buf, size_t len)
{
	long long oom;

	if (status < 0)
		snprintf(buf, len, "exited (it was adopted after a squashd restart; its status is unknown)");
	else if (!WIFSIGNALED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WTERMSIG(status) == SIGKILL && reader_cgroup_memory_limit() &&
		 (oom = reader_cgroup_oom_kills(uid)) > 0)
		/* The likely cause, for the admin: the user's budget, not the node. */
		snprintf(buf, len, "was killed by signal 9 (the kernel's OOM killer has ended %lld process(es) "
			 "of uid %u's FUSE servers at reader_memory_max, %llu bytes)",
			 oom, (unsigned)uid, reader_cgroup_memory_limit());
	else
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
}

/* A dead FUSE mount answers ENOTCONN: detaching it does not block. */
static void detach_dead(const char *path, int timeout_ms)
{
	(void)timeout_ms;
	if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
		log_warning("detaching dead mount %s: %s", path, strerror(errno));
	/* Its entry, while jobs still hold it, removes it again: harmless. */
	rmdir(path);
}

/* fuse_servers_mark_dead_locked, its line said at level (LOG_DEBUG for a
 * reader's death, which server_exited sums up in one line). */
static void mark_dead_locked(struct daemon_state *ds, struct mount_entry *m, const char *how,
			     struct teardown *td, bool say)
{
	size_t len = strlen(m->mount_point) + 1;
	struct teardown_dir *d = malloc(sizeof(*d) + len);

	if (say)
		log_error("FUSE server of image %s (pid %d) %s; its mount %s is dead%s",
			  m->image, (int)m->server_pid, how, m->mount_point,
			  m->refcount ? " and is replaced for new jobs" : "");
	else
		log_debug("FUSE server of image %s (pid %d) %s; its mount %s is dead", m->image,
			  (int)m->server_pid, how, m->mount_point);
	free(m->failure);
	m->failure = strdup(how);
	m->state = MOUNT_DEAD;
	m->server_pid = 0;
	if (m->server_pidfd >= 0)
		close(m->server_pidfd);
	m->server_pidfd = -1;
	/* The last descriptor of the connection: the kernel aborts it now. */
	fuse_keep_free(m->keep);
	m->keep = NULL;
	if (d) {
		memcpy(d->path, m->mount_point, len);
		d->remove = detach_dead;
		d->next = td->dirs;
		td->dirs = d;
	} else {
		detach_dead(m->mount_point, 0);
	}
	if (m->refcount == 0)
		registry_remove_mount(&ds->registry, m);
}

void fuse_servers_mark_dead_locked(struct daemon_state *ds, struct mount_entry *m, const char *how,
				   struct teardown *td)
{
	mark_dead_locked(ds, m, how, td, true);
}

/* A new reader on the kept connection (lock held); why, when there is a
 * connection but no new reader, says why. Said per mount at debug level
 * only: server_exited says it once for all of the reader's mounts. */
static bool restart_server_locked(struct daemon_state *ds, const struct squashd_config *cfg,
				  struct mount_entry *m, pid_t *new_pid, char *why, size_t whylen)
{
	pid_t pid;
	int pidfd;

	if (!m->keep || !cfg)
		return false;
	if (fuse_keep_restart(m->keep, config_fuse_server(cfg), &pid, &pidfd, why, whylen) != RESULT_OK) {
		log_debug("FUSE server of image %s (pid %d): %s", m->image, (int)m->server_pid, why);
		return false;
	}
	log_debug("FUSE server of image %s (pid %d) died; now served by pid %d", m->image, (int)m->server_pid,
		  (int)pid);
	*new_pid = pid;
	if (m->server_pidfd >= 0)
		close(m->server_pidfd);
	m->server_pid = pid;
	m->server_pidfd = pidfd;
	fuse_servers_watch_locked(ds, m);
	return true;
}

/* Whether m lost its server pid and is to get a new reader (lock held):
 * not past its restart budget, for which no reader is started. */
static bool to_restart_locked(const struct mount_entry *m, pid_t pid, long long now_ms)
{
	return m->state == MOUNT_READY && m->server_pid == pid && m->keep && child_exited(m->server_pidfd) &&
	       fuse_keep_may_restart(m->keep, now_ms);
}

/* Starts, without ds->lock, the readers that the mounts of dead server
 * pid need to be resumed on (reader_pool_prepare); false, with why, when
 * it could not. */
static bool prepare_readers(struct daemon_state *ds, const struct squashd_config *cfg, pid_t pid, char *why,
			    size_t whylen)
{
	struct identity owner = { 0 };
	unsigned n = 0;
	long long now = squash_now_ms();

	pthread_mutex_lock(&ds->lock);
	for (const struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		if (to_restart_locked(m, pid, now) && n++ == 0)
			owner = m->keep->owner;
	pthread_mutex_unlock(&ds->lock);
	return n == 0 || reader_pool_prepare(&owner, config_fuse_server(cfg), n, why, whylen) == RESULT_OK;
}

static void server_exited(void *arg, pid_t pid, int status)
{
	struct server_watch *w = arg;
	struct daemon_state *ds = w->ds;
	char how[256];

	describe_death(status, w->uid, how, sizeof(how));
	reader_pool_died(pid);
	/* Whatever it forked goes with it (its own cgroup or scope). */
	reader_cgroup_usage_reader_ending(w->uid, pid);
	reader_cgroup_end(w->uid, pid);
	const struct squashd_config *cfg = settings_hold();
	struct teardown td = TEARDOWN_INIT(cfg);
	char why[256] = "";
	/* The readers the restarts need are started first, without the lock
	 * every request takes: under it, a restart only sends. */
	bool readers = cfg && prepare_readers(ds, cfg, pid, why, sizeof(why));

	pthread_mutex_lock(&ds->lock);
	for (struct server_watch **pw = &watched; *pw; pw = &(*pw)->next)
		if (*pw == w) {
			*pw = w->next;
			break;
		}
	/* Every mount it served. One being torn down is expected to lose its
	 * server; a lingering one nobody uses just goes; those under jobs get
	 * a new reader (started above, by prepare_readers). */
	unsigned restarted = 0, dead = 0, held = 0;
	pid_t new_pid = 0;
	const char *example = NULL;

	for (struct mount_entry *m = ds->registry.mounts, *next; m; m = next) {
		next = m->next;
		if ((m->state == MOUNT_READY || m->state == MOUNT_LINGERING) && m->server_pid == pid &&
		    child_exited(m->server_pidfd)) {
			if (readers && m->state == MOUNT_READY &&
			    restart_server_locked(ds, cfg, m, &new_pid, why, sizeof(why))) {
				restarted++;
			} else {
				dead++;
				held += m->refcount > 0;
				example = example ? example : m->image;
				mark_dead_locked(ds, m, how, &td, false);
			}
		}
	}
	bool changed = restarted || dead;
	/* One line for all of them (a reader serves up to 512 mounts), on
	 * its user's log budget: the reader ran as that user, who may kill
	 * it at will (util/log.h, log_context_peer). */
	if (restarted && !dead)
		log_warning("FUSE server pid %d of uid %u %s; its %u mount(s) restarted as pid %d on the same "
			    "connections (requests in flight are resent)", (int)pid, (unsigned)w->uid, how,
			    restarted, (int)new_pid);
	else if (dead) {
		char others[64] = "";
		if (restarted)
			snprintf(others, sizeof(others), "; %u others restarted as pid %d", restarted,
				 (int)new_pid);
		log_warning("FUSE server pid %d of uid %u %s; %u of its mounts are dead (%u held by jobs, "
			    "replaced for new jobs; image %s%s%s)%s", (int)pid, (unsigned)w->uid, how, dead,
			    held, example, why[0] ? ": " : "", why, others);
	}
	/* Once for all of them: a reader serves up to 512 mounts, and each
	 * save copies the whole registry under the lock every request takes. */
	if (changed)
		daemon_save_locked(ds);
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
	reader_pool_release_unused(w->uid);
	/* The dead mounts' detaches (nothing else is queued here). */
	teardown_dirs_run(&td, 0);
	settings_drop(cfg);
	close(w->pidfd);
	free(w);
}

void fuse_servers_watch_locked(struct daemon_state *ds, struct mount_entry *m)
{
	for (const struct server_watch *o = watched; o; o = o->next)
		if (o->pid == m->server_pid && !child_exited(o->pidfd))
			return; /* it serves another mount already watched */

	struct server_watch *w = malloc(sizeof(*w));
	int fd = m->server_pidfd >= 0 ? fcntl(m->server_pidfd, F_DUPFD_CLOEXEC, 0) : -1;
	int mine = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;

	if (w && mine >= 0) {
		*w = (struct server_watch){ ds, m->server_pid, m->key.owner_uid, watched, mine };
		watched = w;
		if (process_watch_add(fd, m->server_pid, m->key.owner_uid, server_exited, w) == 0)
			return;
		watched = w->next;
	}
	if (mine >= 0)
		close(mine);
	log_warning("cannot watch the FUSE server of %s (pid %d); its death will go unnoticed",
		    m->mount_point, (int)m->server_pid);
	free(w);
	if (fd >= 0)
		close(fd);
}

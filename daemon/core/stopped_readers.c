/* Users' FUSE servers that stay stopped, killed (stopped_readers.h). */
#include "config.h"
#include "core/stopped_readers.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "core/pid_rotation.h"
#include "process/reader_process.h"
#include "util/log.h"

/* Distinct servers looked at per round: one per user with squash-reader
 * (squashfuse_ll: one per mount). Past that, each round looks at the next
 * SERVERS_MAX in pid order, so every server is looked at within a few
 * rounds however many mounts any user has. */
#define SERVERS_MAX 1024

static pthread_t thread;
static bool started;

/* Servers seen stopped, and since when. */
static struct seen {
	pid_t pid;
	long long since_ms;
} seen[SERVERS_MAX];
static size_t n_seen;

/* This round's servers into pids (lock held): the SERVERS_MAX after
 * *cursor of every distinct server pid (core/pid_rotation.h). The sorted
 * list of them all is left in *all (n_all) for carry_over. */
static size_t servers_this_round_locked(struct daemon_state *ds, pid_t *pids, size_t *cursor, pid_t **all,
					size_t *n_all)
{
	size_t n = 0;

	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		n += m->server_pid > 0 && m->server_pidfd >= 0;
	*all = NULL;
	*n_all = 0;
	if (n == 0 || !(*all = malloc(n * sizeof(**all))))
		return 0;
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		if (m->server_pid > 0 && m->server_pidfd >= 0)
			(*all)[(*n_all)++] = m->server_pid;
	return pid_rotation_pick(*all, n_all, cursor, pids, SERVERS_MAX);
}

/* Entries of servers that still serve but were not looked at this round,
 * kept (up to the table's size): their time stopped goes on. */
static void carry_over(const pid_t *pids, size_t n, const pid_t *all, size_t n_all, struct seen *next,
		       size_t *n_next)
{
	for (size_t i = 0; i < n_seen && *n_next < SERVERS_MAX; i++) {
		bool looked = false;

		for (size_t j = 0; j < n && !looked; j++)
			looked = pids[j] == seen[i].pid;
		if (!looked && pid_rotation_has(all, n_all, seen[i].pid))
			next[(*n_next)++] = seen[i];
	}
}

/* Since when pid has been seen stopped (now_ms when new); 0 when the
 * table is full. */
static long long stopped_since(pid_t pid, long long now_ms, struct seen *next, size_t *n_next)
{
	long long since = now_ms;

	for (size_t i = 0; i < n_seen; i++)
		if (seen[i].pid == pid)
			since = seen[i].since_ms;
	if (*n_next == SERVERS_MAX)
		return 0;
	next[(*n_next)++] = (struct seen){ pid, since };
	return since;
}

/* Kills pid through a mount's pidfd (lock held): never a pid reused. */
static void kill_locked(struct daemon_state *ds, pid_t pid, unsigned timeout_s)
{
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next) {
		if (m->server_pid != pid || m->server_pidfd < 0)
			continue;
		if (syscall(SYS_pidfd_send_signal, m->server_pidfd, SIGKILL, NULL, 0) == 0)
			log_warning("FUSE server pid %d of uid %u was stopped for %u s or more: killed, so "
				    "that nobody's requests to its mounts wait for it (df, the node's "
				    "health check, other jobs); its mounts restart (stopped_reader_timeout)",
				    (int)pid, (unsigned)m->key.owner_uid, timeout_s);
		return;
	}
}

static void *watch(void *arg)
{
	struct daemon_state *ds = arg;
	static pid_t pids[SERVERS_MAX];
	static struct seen next[SERVERS_MAX];
	size_t cursor = 0;

	pthread_mutex_lock(&ds->lock);
	while (!ds->stopping) {
		const struct squashd_config *cfg = settings_hold();
		unsigned timeout_s = cfg->stopped_reader_timeout_s;
		size_t n = 0, n_next = 0, n_all = 0;
		pid_t *all = NULL;

		settings_drop(cfg);
		/* The servers, each once (a user's squash-reader serves all
		 * their mounts); /proc is read without the lock. */
		if (timeout_s)
			n = servers_this_round_locked(ds, pids, &cursor, &all, &n_all);
		pthread_mutex_unlock(&ds->lock);
		long long now = squash_now_ms();
		for (size_t i = 0; i < n; i++) {
			if (!reader_process_stopped(pids[i]))
				continue;
			long long since = stopped_since(pids[i], now, next, &n_next);
			if (since && now - since >= (long long)timeout_s * 1000) {
				pthread_mutex_lock(&ds->lock);
				kill_locked(ds, pids[i], timeout_s);
				pthread_mutex_unlock(&ds->lock);
			}
		}
		carry_over(pids, n, all, n_all, next, &n_next);
		free(all);
		memcpy(seen, next, n_next * sizeof(next[0]));
		n_seen = n_next;
		pthread_mutex_lock(&ds->lock);
		/* ds->changed uses CLOCK_MONOTONIC (daemon_init); every change of
		 * the registry broadcasts it, so the round's time is waited out
		 * (only a stop ends it early). */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)STOPPED_READERS_CHECK_MS % 1000 * 1000000L;
		ts.tv_sec += STOPPED_READERS_CHECK_MS / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		while (!ds->stopping && pthread_cond_timedwait(&ds->changed, &ds->lock, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&ds->lock);
	return NULL;
}

int stopped_readers_start(struct daemon_state *ds)
{
	int rc = pthread_create(&thread, NULL, watch, ds);

	if (rc != 0) {
		log_error("cannot start the watch of stopped FUSE servers: %s", strerror(rc));
		return -1;
	}
	started = true;
	return 0;
}

void stopped_readers_finish(void)
{
	if (started)
		pthread_join(thread, NULL);
	started = false;
}

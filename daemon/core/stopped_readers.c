/* Users' FUSE servers that stay stopped, killed (stopped_readers.h). */
#include "config.h"
#include "core/stopped_readers.h"

#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "process/reader_process.h"
#include "util/log.h"

/* Distinct servers looked at per round: one per user with squash-reader
 * (squashfuse_ll: one per mount); any past that are not looked at. */
#define SERVERS_MAX 1024

static pthread_t thread;
static bool started;

/* Servers seen stopped, and since when. */
static struct seen {
	pid_t pid;
	long long since_ms;
} seen[SERVERS_MAX];
static size_t n_seen;

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

	pthread_mutex_lock(&ds->lock);
	while (!ds->stopping) {
		const struct squashd_config *cfg = settings_hold();
		unsigned timeout_s = cfg->stopped_reader_timeout_s;
		size_t n = 0, n_next = 0;

		settings_drop(cfg);
		/* The servers, each once (a user's squash-reader serves all
		 * their mounts); /proc is read without the lock. */
		for (struct mount_entry *m = ds->registry.mounts; timeout_s && m && n < SERVERS_MAX;
		     m = m->next) {
			bool known = m->server_pid <= 0 || m->server_pidfd < 0;

			for (size_t i = 0; i < n && !known; i++)
				known = pids[i] == m->server_pid;
			if (!known)
				pids[n++] = m->server_pid;
		}
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

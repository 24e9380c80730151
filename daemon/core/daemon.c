#include "config.h"
#include "core/daemon.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "mount/private_roots.h"
#include "registry/snapshot.h"
#include "registry/state_file.h"
#include "util/log.h"

/* The node's Slurm name: configured, or the short host name. */
static void node_name(const struct squashd_config *cfg, char *buf, size_t len)
{
	if (cfg->node_name[0]) {
		snprintf(buf, len, "%s", cfg->node_name);
		return;
	}
	if (gethostname(buf, len - 1) < 0)
		snprintf(buf, len, "localhost");
	buf[len - 1] = '\0';
	char *dot = strchr(buf, '.');
	if (dot)
		*dot = '\0';
}

int daemon_init(struct daemon_state *ds, const struct squashd_config *cfg)
{
	pthread_condattr_t attr;

	ds->started_ms = squash_now_ms();
	node_name(cfg, ds->node_name, sizeof(ds->node_name));
	if (snprintf(ds->state_path, sizeof(ds->state_path), "%s/state", cfg->state_dir) >= (int)sizeof(ds->state_path) ||
	    snprintf(ds->mount_dir, sizeof(ds->mount_dir), "%s/mnt", cfg->state_dir) >= (int)sizeof(ds->mount_dir) ||
	    snprintf(ds->sessions_dir, sizeof(ds->sessions_dir), "%s/sessions", cfg->state_dir) >= (int)sizeof(ds->sessions_dir)) {
		log_error("state_dir %s is too long", cfg->state_dir);
		return -1;
	}
	if (pthread_mutex_init(&ds->lock, NULL) != 0 || pthread_mutex_init(&ds->save_io, NULL) != 0 ||
	    pthread_condattr_init(&attr) != 0) {
		log_error("cannot initialise locks");
		return -1;
	}
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&ds->changed, &attr);
	if (rc == 0)
		rc = pthread_cond_init(&ds->saved, NULL);
	if (rc == 0)
		rc = pthread_cond_init(&ds->save_wanted, NULL);
	pthread_condattr_destroy(&attr);
	if (rc != 0)
		log_error("cannot initialise locks");
	return rc == 0 ? 0 : -1;
}

void daemon_stop(struct daemon_state *ds)
{
	pthread_mutex_lock(&ds->lock);
	ds->stopping = true;
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
}

/* A registry of another format that an earlier squashd kept aside in
 * the state directory (name into buf), if any. Damaged ones kept aside
 * need no admin: the registry was rebuilt from the node then. */
static bool find_other_format(const struct daemon_state *ds, char *buf, size_t len)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", ds->state_path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return false;
	*slash = '\0';
	DIR *d = opendir(dir);
	bool found = false;
	unsigned format;
	if (!d)
		return false;
	for (struct dirent *de; !found && (de = readdir(d));)
		if (!strncmp(de->d_name, "state.unreadable-", 17) &&
		    snprintf(buf, len, "%s/%s", dir, de->d_name) < (int)len)
			found = state_file_probe_format(buf, &format) == -2;
	closedir(d);
	return found;
}

void daemon_load(struct daemon_state *ds)
{
	char err[PATH_MAX + 512], aside[PATH_MAX + 64];
	int rc = state_file_load(&ds->registry, ds->state_path, err, sizeof(err));

	if (rc == 0) {
		/* A newer squashd's registry kept aside earlier still holds
		 * mounts only it knows (a restart does not make them known). */
		if (find_other_format(ds, aside, sizeof(aside))) {
			snprintf(ds->state_lost, sizeof(ds->state_lost),
				 "%s holds a registry of another format an earlier squashd could not read", aside);
			log_error("%s; squashd mounts nothing, leaves the mounts in %s alone and refuses new ones "
				  "until it is removed and squashd restarted (see docs/admin.md, \"Upgrading "
				  "slurm-squash itself\")", ds->state_lost, ds->mount_dir);
		}
		return;
	}
	time_t now = time(NULL);
	struct tm tm;
	char stamp[32] = "unknown";
	if (gmtime_r(&now, &tm))
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(aside, sizeof(aside), "%s.unreadable-%s", ds->state_path, stamp);
	if (rc == 1) {
		/* Some entries dropped (state_file.h), the rest loaded: a copy
		 * for the admin; the file itself stays until the next save. */
		if (link(ds->state_path, aside) < 0)
			snprintf(aside, sizeof(aside), "%s (could not be copied aside: %s)", ds->state_path,
				 strerror(errno));
		snprintf(ds->state_rebuilt, sizeof(ds->state_rebuilt), "%.*s; kept as %.*s", PATH_MAX, err,
			 PATH_MAX, aside);
		log_error("cannot read all of the registry: %s; the mounts of the dropped entries are "
			  "detached as unknown (their jobs keep their own copies), every other entry is "
			  "kept; no admin action is needed", ds->state_rebuilt);
		return;
	}
	if (rename(ds->state_path, aside) < 0)
		snprintf(aside, sizeof(aside), "%s (could not be moved aside: %s)", ds->state_path, strerror(errno));
	if (rc == -1) {
		/* Damaged: everything it held is on the node (mountinfo, the
		 * jobs' own copies, Slurm), so start as after a deleted file. */
		snprintf(ds->state_rebuilt, sizeof(ds->state_rebuilt), "%.*s; kept as %.*s", PATH_MAX, err,
			 PATH_MAX, aside);
		log_error("cannot read the registry: %s; rebuilding it from the node: mounts squashd does not "
			  "know are detached from its namespace (running jobs keep their own copies until they "
			  "end), new jobs get mounts of their own; no admin action is needed",
			  ds->state_rebuilt);
		return;
	}
	/* Another format (a downgrade): only the squashd that wrote it knows
	 * what the mounts in mnt/ are; keep it aside for it, leave the mounts
	 * alone and refuse new ones. */
	snprintf(ds->state_lost, sizeof(ds->state_lost), "%.*s; kept as %.*s", PATH_MAX, err, PATH_MAX, aside);
	log_error("cannot read the registry: %s; squashd mounts nothing, leaves the mounts in %s alone and "
		  "refuses new ones until an admin acts: install the slurm-squash that wrote it, move the "
		  "file back to state and restart squashd (see docs/admin.md, \"Upgrading slurm-squash "
		  "itself\")", ds->state_lost, ds->mount_dir);
}

void daemon_make_roots_private(struct daemon_state *ds)
{
	const char *dirs[] = { ds->mount_dir, ds->sessions_dir };
	char why[sizeof(ds->roots_shared)];
	bool deferred = false;

	for (size_t i = 0; i < 2; i++) {
		int r = private_root_make(dirs[i], why, sizeof(why));
		if (r < 0) {
			log_error("%s: a user who fills a mount namespace of theirs can make squashd's "
				  "mounts fail for everyone", why);
			pthread_mutex_lock(&ds->lock); /* status reads it */
			snprintf(ds->roots_shared, sizeof(ds->roots_shared), "%s", why);
			pthread_mutex_unlock(&ds->lock);
			ds->roots_deferred = false;
			return;
		}
		deferred |= r > 0;
	}
	if (deferred && !ds->roots_deferred)
		log_warning("%s or %s still holds mounts of an older squashd, which reach every namespace "
			    "that receives /run's mounts: it becomes a private mount of its own once they "
			    "are gone (checked at each gc pass)", ds->mount_dir, ds->sessions_dir);
	else if (!deferred && ds->roots_deferred)
		log_info("%s and %s are private mounts of their own now", ds->mount_dir, ds->sessions_dir);
	ds->roots_deferred = deferred;
}

void daemon_free(struct daemon_state *ds)
{
	pthread_mutex_lock(&ds->lock);
	ds->saver_exit = true;
	pthread_cond_signal(&ds->save_wanted);
	pthread_mutex_unlock(&ds->lock);
	if (ds->saver_running)
		pthread_join(ds->saver, NULL); /* (it writes the last save wanted first) */
	ds->saver_running = false;
	registry_free(&ds->registry);
}

/* Writes are serialised by ds->save_io, not under ds->lock; a snapshot
 * older than the one already written is not written over it. */

/* Writes snapshot seq (ds->lock may or may not be held; never taken). */
static int write_snapshot(struct daemon_state *ds, unsigned long long seq, const char *text,
			  size_t len, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&ds->save_io);
	if (seq > ds->save_io_written) {
		rc = state_file_write(ds->state_path, text, len, err, errlen);
		if (rc == 0)
			ds->save_io_written = seq;
	}
	pthread_mutex_unlock(&ds->save_io);
	return rc;
}

/* Records how the save of snapshot seq went (lock held). */
static int record_save(struct daemon_state *ds, unsigned long long seq, int rc, const char *err)
{
	if (rc < 0) {
		ds->registry_save_errors++;
		if (seq > ds->save_failed)
			ds->save_failed = seq;
		if (strcmp(ds->save_error, err))
			log_error("cannot save the registry: %s; new mounts are refused until it can be saved",
				  err);
		snprintf(ds->save_error, sizeof(ds->save_error), "%s", err);
		return -1;
	}
	if (seq > ds->save_durable)
		ds->save_durable = seq;
	if (ds->save_error[0]) {
		log_info("the registry can be saved again");
		ds->save_error[0] = '\0';
	}
	return 0;
}

/* Formats snapshot seq and writes it (unlocked). */
static int format_and_write(struct daemon_state *ds, const struct registry *snap, unsigned long long seq,
			    char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int rc = -1;

	if (state_file_format(snap, &text, &len) < 0)
		snprintf(err, errlen, "cannot write %s: out of memory", ds->state_path);
	else
		rc = write_snapshot(ds, seq, text, len, err, errlen);
	free(text);
	return rc;
}

static void *saver_main(void *arg)
{
	struct daemon_state *ds = arg;
	char err[PATH_MAX + 256];

	pthread_mutex_lock(&ds->lock);
	for (;;) {
		while (!ds->save_next_seq && !ds->saver_exit)
			pthread_cond_wait(&ds->save_wanted, &ds->lock);
		if (!ds->save_next_seq)
			break;
		/* Copied now, after every change its savers made, and numbered
		 * now: above every number promised before (and below any save
		 * made after it), so a save promised N is on disk once any save
		 * numbered N or higher is. */
		unsigned long long seq = ++ds->save_taken;
		struct registry *snap = registry_snapshot(&ds->registry);
		int rc;
		ds->save_next_seq = 0;
		ds->save_copies++;
		if (!snap) { /* no memory: the old way, under the lock */
			rc = format_and_write(ds, &ds->registry, seq, err, sizeof(err));
		} else {
			ds->save_writing = true;
			pthread_mutex_unlock(&ds->lock);
			rc = format_and_write(ds, snap, seq, err, sizeof(err));
			registry_snapshot_free(snap);
			pthread_mutex_lock(&ds->lock);
			ds->save_writing = false;
		}
		record_save(ds, seq, rc, err);
		pthread_cond_broadcast(&ds->saved);
	}
	pthread_mutex_unlock(&ds->lock);
	return NULL;
}

/* Formats and writes the registry now, under the lock: when saving
 * failed (a fault: rare), so the caller learns at once whether it can. */
static int save_now_locked(struct daemon_state *ds)
{
	char err[PATH_MAX + 256];
	unsigned long long seq = ++ds->save_taken;
	int rc = format_and_write(ds, &ds->registry, seq, err, sizeof(err));

	rc = record_save(ds, seq, rc, err);
	pthread_cond_broadcast(&ds->saved);
	return rc;
}

/* Asks the saver for a save (lock held); returns the number promised.
 * One not yet begun is shared: its copy will hold this caller's changes
 * too. */
static unsigned long long take_snapshot_locked(struct daemon_state *ds)
{
	if (!ds->saver_running && pthread_create(&ds->saver, NULL, saver_main, ds) != 0) {
		save_now_locked(ds); /* (no thread: the old way) */
		return ds->save_taken;
	}
	ds->saver_running = true;
	if (!ds->save_next_seq)
		ds->save_next_seq = ++ds->save_taken;
	pthread_cond_signal(&ds->save_wanted);
	return ds->save_next_seq;
}

int daemon_save_locked(struct daemon_state *ds)
{
	take_snapshot_locked(ds);
	return ds->save_error[0] ? -1 : 0;
}

int daemon_save_grouped_locked(struct daemon_state *ds)
{
	/* Every caller until the saver takes it shares one snapshot: a burst
	 * pays for a few writes. */
	unsigned long long seq = take_snapshot_locked(ds);

	while (ds->save_durable < seq && ds->save_failed < seq)
		pthread_cond_wait(&ds->saved, &ds->lock);
	return ds->save_durable >= seq ? 0 : -1;
}

int daemon_time_left(long long deadline_ms)
{
	long long left = deadline_ms - squash_now_ms();
	return left > 0 ? (int)left : 0;
}

bool daemon_wait_locked(struct daemon_state *ds, long long deadline_ms)
{
	struct timespec ts;
	long long now = squash_now_ms();

	if (ds->stopping || now >= deadline_ms)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	long long ns = ts.tv_nsec + (deadline_ms - now) * 1000000LL;
	ts.tv_sec += ns / 1000000000LL;
	ts.tv_nsec = ns % 1000000000LL;
	pthread_cond_timedwait(&ds->changed, &ds->lock, &ts);
	return !ds->stopping;
}

Squash__Status daemon_refuse_new_mounts_locked(struct daemon_state *ds, char *why, size_t len)
{
	if (ds->stopping) {
		snprintf(why, len, "squashd is stopping");
		return SQUASH__STATUS__UNAVAILABLE;
	}
	if (ds->state_lost[0]) {
		snprintf(why, len, "squashd on this node could not read its registry at start (%s); it mounts "
			 "nothing until an admin has looked (squashctl health on the node; docs/admin.md, "
			 "\"Upgrading slurm-squash itself\")", ds->state_lost);
		return SQUASH__STATUS__NODE_ERROR;
	}
	if (ds->save_error[0] && save_now_locked(ds) < 0) {
		snprintf(why, len, "squashd on this node cannot save its registry (%s); it mounts nothing "
			 "until it can", ds->save_error);
		return SQUASH__STATUS__NODE_ERROR;
	}
	return SQUASH__STATUS__OK;
}

void teardown_dirs_run(struct teardown *td, int timeout_ms)
{
	for (struct teardown_dir *d = td->dirs, *next; d; d = next) {
		next = d->next;
		d->remove(d->path, timeout_ms);
		free(d);
	}
	td->dirs = NULL;
}

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
	if (pthread_mutex_init(&ds->lock, NULL) != 0 || pthread_condattr_init(&attr) != 0) {
		log_error("cannot initialise locks");
		return -1;
	}
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&ds->changed, &attr);
	if (rc == 0)
		rc = pthread_cond_init(&ds->saved, NULL);
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

void daemon_free(struct daemon_state *ds)
{
	registry_free(&ds->registry);
}

/* Writes are serialised here, not under ds->lock; a snapshot older than
 * the one already written is not written over it. */
static pthread_mutex_t save_io = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long save_io_written; /* guarded by save_io */

/* Writes snapshot seq (ds->lock may or may not be held; never taken). */
static int write_snapshot(struct daemon_state *ds, unsigned long long seq, const char *text,
			  size_t len, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&save_io);
	if (seq > save_io_written) {
		rc = state_file_write(ds->state_path, text, len, err, errlen);
		if (rc == 0)
			save_io_written = seq;
	}
	pthread_mutex_unlock(&save_io);
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

int daemon_save_locked(struct daemon_state *ds)
{
	char err[PATH_MAX + 256];
	char *text = NULL;
	size_t len = 0;
	unsigned long long seq = ++ds->save_taken;
	int rc;

	if (state_file_format(&ds->registry, &text, &len) < 0) {
		snprintf(err, sizeof(err), "cannot write %s: out of memory", ds->state_path);
		rc = -1;
	} else {
		rc = write_snapshot(ds, seq, text, len, err, sizeof(err));
	}
	free(text);
	rc = record_save(ds, seq, rc, err);
	pthread_cond_broadcast(&ds->saved);
	return rc;
}

int daemon_save_grouped_locked(struct daemon_state *ds)
{
	/* Any snapshot taken from now on holds this caller's changes. */
	unsigned long long want = ds->save_taken + 1;

	while (ds->save_durable < want) {
		if (ds->save_failed >= want)
			return -1;
		if (ds->save_writing) {
			pthread_cond_wait(&ds->saved, &ds->lock);
			continue;
		}
		/* Nobody is writing: take the snapshot (all changes so far) and
		 * write it unlocked; those who come meanwhile wait for the next. */
		char err[PATH_MAX + 256];
		char *text = NULL;
		size_t len = 0;
		unsigned long long seq = ++ds->save_taken;
		int rc = -1;

		if (state_file_format(&ds->registry, &text, &len) < 0) {
			snprintf(err, sizeof(err), "cannot write %s: out of memory", ds->state_path);
		} else {
			ds->save_writing = true;
			pthread_mutex_unlock(&ds->lock);
			rc = write_snapshot(ds, seq, text, len, err, sizeof(err));
			pthread_mutex_lock(&ds->lock);
			ds->save_writing = false;
		}
		free(text);
		record_save(ds, seq, rc, err);
		pthread_cond_broadcast(&ds->saved);
	}
	return 0;
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
	if (ds->save_error[0] && daemon_save_locked(ds) < 0) {
		snprintf(why, len, "squashd on this node cannot save its registry (%s); it mounts nothing "
			 "until it can", ds->save_error);
		return SQUASH__STATUS__NODE_ERROR;
	}
	return SQUASH__STATUS__OK;
}

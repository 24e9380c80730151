#include "config.h"
#include "core/adopt.h"

#include <dirent.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/fuse_servers.h"
#include "core/holder_watch.h"
#include "core/job_end_watch.h"
#include "core/merge.h"
#include "core/holders.h"
#include "core/overlay.h"
#include "core/owner_teardown.h"
#include "core/sessions.h"
#include "core/sharing.h"
#include "process/child_process.h"
#include "process/reader_process.h"
#include "mount/fuse_keep_adopt.h"
#include "mount/mount_fuse.h"
#include "mount/reader_pool.h"
#include "mount/unmount.h"
#include "util/log.h"

static bool known_mount_point(struct daemon_state *ds, const char *path)
{
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		if (!strcmp(m->mount_point, path))
			return true;
	for (struct job_entry *j = ds->registry.jobs; j; j = j->next)
		if (j->overlay_dir && !strcmp(j->overlay_dir, path))
			return true;
	return false;
}

/* Whether an adopted FUSE server still runs, as a reader squashd could
 * have started for the mount's user before this squashd started (the pid
 * may have been reused, by anyone, even by a process of the user's named
 * squash-reader: reader_process.h); opens its pidfd. */
static bool adopt_server(struct mount_entry *m, enum reader_kind *kind)
{
	char why[128];

	m->server_pidfd = child_pidfd(m->server_pid);
	if (m->server_pidfd < 0)
		return false;
	*kind = reader_process_kind(m->server_pidfd, m->server_pid, m->key.owner_uid, true, why,
				    sizeof(why));
	if (*kind == READER_NONE) {
		log_warning("not adopting pid %d as the FUSE server of %s: %s", (int)m->server_pid,
			    m->mount_point, why);
		close(m->server_pidfd);
		m->server_pidfd = -1;
		return false;
	}
	return true;
}

/* A kept connection for an adopted mount, so that its reader can be
 * replaced under running jobs as for mounts made by this squashd
 * (fuse_keep.h): copied out of the running reader. Only from
 * squash-reader (another server's node ids would not fit a new reader)
 * and only when a new one could resume. */
static void adopt_connection_locked(struct daemon_state *ds, struct fuse_keep_adoption *a,
				    struct mount_entry *m, enum reader_kind kind)
{
	struct identity *owner = malloc(sizeof(*owner));
	char err[PATH_MAX + 256];

	if (!owner || m->keep || !ds->fuse_reader_resumes || !fuse_kernel_resends() ||
	    kind != READER_SQUASH_READER) {
		free(owner);
		return;
	}
	/* A union's images, or the mount's one. */
	size_t n = m->n_parts ? m->n_parts : 1;
	struct kept_image *images = malloc(n * sizeof(*images));
	for (size_t i = 0; images && i < n; i++) {
		const struct mount_key *k = m->n_parts ? &m->parts[i] : &m->key;
		images[i] = (struct kept_image){ .dev = k->dev, .ino = k->ino };
	}
	if (!images)
		snprintf(err, sizeof(err), "out of memory");
	else if (identity_lookup(m->key.owner_uid, owner, err, sizeof(err)) == RESULT_OK)
		m->keep = fuse_keep_adopt(a, m->server_pidfd, m->server_pid, m->mount_point, images, n,
					  owner, err, sizeof(err));
	free(images);
	if (m->keep)
		log_info("kept the FUSE connection of %s from its reader (pid %d): "
			 "a reader that dies is replaced", m->mount_point, (int)m->server_pid);
	else
		log_warning("no kept FUSE connection for %s: %s; if its reader dies the mount ends",
			    m->mount_point, err);
	free(owner);
}

/* Adds to each mount's refcount one per job, step or session image that
 * names it (the state file stores no counts). */
static void count_references(struct daemon_state *ds)
{
	struct job_entry *lists[] = { ds->registry.jobs, ds->registry.scoped };

	for (size_t l = 0; l < 2; l++)
		for (struct job_entry *j = lists[l]; j; j = j->next)
			for (size_t i = 0; i < j->count; i++) {
				if (j->images[i].mount)
					j->images[i].mount->refcount++;
				if (j->images[i].merged)
					j->images[i].merged->refcount++;
			}
	/* A merged mount holds each of its lowers (core/merge.h). */
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		for (size_t i = 0; i < m->n_lowers; i++)
			if (m->lowers[i])
				m->lowers[i]->refcount++;
}

/* A mount that vanished while squashd was down: its holders lose it. */
static void forget_vanished_locked(struct daemon_state *ds, struct mount_entry *m)
{
	log_warning("mount of %s at %s vanished while squashd was down", m->image, m->mount_point);
	for (struct job_entry *j = ds->registry.jobs; j; j = j->next) {
		if (!registry_job_uses(j, m))
			continue;
		for (size_t i = 0; i < j->count; i++) {
			if (j->images[i].mount == m)
				j->images[i].mount = NULL;
			if (j->images[i].merged == m)
				j->images[i].merged = NULL;
		}
		registry_job_set_failure(j, SQUASH__STATUS__NODE_ERROR,
					 "a mount of this job vanished while squashd was restarting");
	}
	for (struct job_entry *e = ds->registry.scoped; e; e = e->next)
		for (size_t i = 0; i < e->count; i++) {
			if (e->images[i].mount == m)
				e->images[i].mount = NULL;
			if (e->images[i].merged == m)
				e->images[i].merged = NULL;
		}
	/* A merged mount keeps working on its own copy of a vanished lower. */
	for (struct mount_entry *o = ds->registry.mounts; o; o = o->next)
		for (size_t i = 0; i < o->n_lowers; i++)
			if (o->lowers[i] == m)
				o->lowers[i] = NULL;
	rmdir(m->mount_point);
	registry_remove_mount(&ds->registry, m);
}

static void adopt_mounts(struct daemon_state *ds, struct teardown *td)
{
	struct mount_entry *next;

	pthread_mutex_lock(&ds->lock);
	for (struct job_entry *j = ds->registry.jobs; j; j = j->next) {
		if (j->overlay_dir && !overlay_job_intact(j)) {
			log_warning("job %u: its writable overlay in %s vanished while squashd was down",
				    j->job_id, j->overlay_dir);
			overlay_queue_teardown(j, td);
			registry_job_set_failure(j, SQUASH__STATUS__NODE_ERROR,
						 "the job's writable overlay vanished while squashd was restarting");
		}
	}
	/* The state file records merged mounts but not who merges them. */
	merge_relink_locked(ds);
	/* Count references first: a mount found dead below must stay while
	 * jobs still point at it. */
	count_references(ds);
	/* Read once, not once per mount: other users' binds can make it long. */
	struct mount_points mp;
	bool listed = mount_points_read(&mp) == 0;
	struct fuse_keep_adoption *kept = fuse_keep_adoption_begin(ds->mount_dir);
	for (struct mount_entry *m = ds->registry.mounts; m; m = next) {
		next = m->next;
		if (listed ? !mount_points_has(&mp, m->mount_point) : is_mount_point(m->mount_point) <= 0) {
			forget_vanished_locked(ds, m);
			continue;
		}
		log_info("adopted mount of %s at %s", m->image, m->mount_point);
		enum reader_kind kind = READER_NONE;
		if (m->key.mode == SQUASH__MOUNT_MODE__FUSE &&
		    (m->server_pid <= 0 || !adopt_server(m, &kind)))
			fuse_servers_mark_dead_locked(ds, m, "was gone when squashd restarted", td);
		else if (m->server_pid > 0) {
			if (m->key.mode == SQUASH__MOUNT_MODE__FUSE) {
				adopt_connection_locked(ds, kept, m, kind);
				/* A reader may serve several (reader_pool.h). */
				reader_pool_adopt(m->server_pid, m->key.owner_uid);
			}
			fuse_servers_watch_locked(ds, m);
		}
	}
	if (listed)
		mount_points_free(&mp);
	fuse_keep_adoption_end(kept);
	/* Recount references from the jobs (the file stores none). */
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		m->refcount = 0;
	count_references(ds);
	/* Mounts no job holds any more (released while squashd was down). */
	for (struct mount_entry *m = ds->registry.mounts; m; m = next) {
		next = m->next;
		if (m->refcount > 0 && m->state == MOUNT_LINGERING)
			m->state = MOUNT_READY; /* a job still names it */
		if (m->refcount == 0 && m->state != MOUNT_LINGERING) {
			/* (Lingering ones keep their recorded expiry.) */
			if (m->state == MOUNT_DEAD) {
				rmdir(m->mount_point);
				registry_remove_mount(&ds->registry, m);
			} else {
				m->refcount = 1;
				sharing_put_locked(ds, m, td);
			}
		}
	}
	pthread_mutex_unlock(&ds->lock);
}

/* Anything in the mount directory that the registry does not know. */
static void remove_leftovers(struct daemon_state *ds, int timeout_ms)
{
	char err[PATH_MAX + 256];
	DIR *dir = opendir(ds->mount_dir);

	if (!dir)
		return;
	for (struct dirent *de; (de = readdir(dir));) {
		if (de->d_name[0] == '.')
			continue;
		char path[PATH_MAX];
		pthread_mutex_lock(&ds->lock);
		bool known = snprintf(path, sizeof(path), "%s/%s", ds->mount_dir, de->d_name) >= (int)sizeof(path) ||
			     known_mount_point(ds, path);
		pthread_mutex_unlock(&ds->lock);
		if (known)
			continue;
		log_warning("cleaning up unknown leftover %s", path);
		if (overlay_dir_name(de->d_name))
			overlay_remove_dir(path, timeout_ms);
		else if (unmount_image(path, 0, -1, 0, -1, timeout_ms, err, sizeof(err)) != RESULT_OK)
			log_error("cannot clean up %s: %s", path, err);
	}
	closedir(dir);
}

/* Steps and sessions: watch the ones whose process still runs. */
static void adopt_scoped(struct daemon_state *ds, struct teardown *td)
{
	pthread_mutex_lock(&ds->lock);
	/* Before the sessions that ended are dropped: their directories are
	 * moved aside then, to be detached on their owners' threads. */
	sessions_remove_unknown_locked(ds);
	for (struct job_entry *e = ds->registry.scoped, *next; e; e = next) {
		next = e->next;
		if (e->session_pid <= 0)
			continue; /* a step whose slurmstepd could not be watched: gc's */
		int pidfd = child_pidfd(e->session_pid);
		bool same = pidfd >= 0 && holder_start_time(e->session_pid) == e->session_start;
		if (same && holder_watch(ds, e, pidfd) == 0)
			continue;
		if (pidfd >= 0 && !same)
			close(pidfd);
		if (e->kind == HOLDER_SESSION)
			log_info("the session of pid %d ended while squashd was down; releasing it",
				 (int)e->session_pid);
		else
			log_info("step %u.%u: its slurmstepd ended while squashd was down; releasing it",
				 e->job_id, e->step_id);
		holders_drop_locked(ds, e, td);
	}
	daemon_save_locked(ds);
	pthread_mutex_unlock(&ds->lock);
}

void adopt_registry(struct daemon_state *ds, const struct squashd_config *cfg)
{
	struct teardown td = TEARDOWN_INIT(cfg);

	/* Both servers: the previous squashd may have used the other. */
	reader_process_init(cfg->squash_reader, cfg->squashfuse);
	adopt_mounts(ds, &td);
	/* Vanished overlays' directories first: the registry forgot them, so
	 * remove_leftovers would take them for unknown ones. The mounts to
	 * tear down are still in the registry (UNMOUNTING): no leftovers. */
	struct teardown dirs = TEARDOWN_INIT(cfg);
	dirs.dirs = td.dirs;
	td.dirs = NULL;
	sharing_teardown(ds, &dirs);
	remove_leftovers(ds, (int)cfg->request_timeout_s * 1000);
	adopt_scoped(ds, &td);
	/* On their owners' threads: a reader its user stopped while squashd
	 * was down holds up that user's teardown only, not squashd's socket
	 * (core/owner_teardown.h). */
	owners_teardown(ds, &td);
	job_end_watch_adopt(ds);
}

#include "config.h"
#include "core/holders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/merge.h"
#include "core/overlay.h"
#include "core/sessions.h"
#include "core/sharing.h"
#include "core/union_mount.h"
#include "core/user_fuse_mounts.h"
#include "process/identity.h"
#include "registry/usage.h"
#include "util/close_detached.h"
#include "util/log.h"

struct job_entry *holders_find_job_locked(struct daemon_state *ds, uint32_t job_id)
{
	return registry_find_job(&ds->registry, job_id);
}

struct job_entry *holders_add_job_locked(struct daemon_state *ds, uint32_t job_id, uid_t uid)
{
	struct job_entry *job = registry_add_job(&ds->registry, job_id, uid);

	if (job)
		job->pending = true;
	return job;
}

struct job_entry *holders_find_step_locked(struct daemon_state *ds, uint32_t job_id,
					   uint32_t step_id)
{
	return registry_find_step(&ds->registry, job_id, step_id);
}

struct job_entry *holders_add_step_locked(struct daemon_state *ds, uint32_t job_id,
					  uint32_t step_id, uid_t uid, pid_t asker,
					  unsigned long long asker_start)
{
	struct job_entry *e = registry_add_scoped(&ds->registry, HOLDER_STEP, job_id, step_id, uid);

	if (e) {
		e->pending = true;
		e->session_pid = asker;
		e->session_start = asker_start;
	}
	return e;
}

struct job_entry *holders_find_session_locked(struct daemon_state *ds, pid_t pid)
{
	return registry_find_session(&ds->registry, pid);
}

struct job_entry *holders_add_session_locked(struct daemon_state *ds, uid_t uid, pid_t pid,
					     unsigned long long start)
{
	struct job_entry *e = registry_add_scoped(&ds->registry, HOLDER_SESSION, 0, 0, uid);

	if (e) {
		e->pending = true;
		e->session_pid = pid;
		e->session_start = start;
	}
	return e;
}

unsigned holders_sessions_of_locked(const struct daemon_state *ds, uid_t uid)
{
	unsigned n = 0;

	for (const struct job_entry *s = ds->registry.scoped; s; s = s->next)
		n += s->kind == HOLDER_SESSION && s->uid == uid;
	return n;
}

const struct job_entry *holders_next_locked(const struct daemon_state *ds,
					    const struct job_entry *prev,
					    const struct mount_entry *m)
{
	const struct job_entry *e = !prev ? ds->registry.jobs : prev->next;

	/* Jobs first; the scoped list follows the last job. */
	if (!e && (!prev || prev->kind == HOLDER_JOB))
		e = ds->registry.scoped;
	while (e && m && !registry_job_uses(e, m)) {
		bool last_job = e->kind == HOLDER_JOB && !e->next;
		e = last_job ? ds->registry.scoped : e->next;
	}
	return e;
}

void holders_settle_locked(struct daemon_state *ds, struct job_entry *e)
{
	e->pending = false;
	pthread_cond_broadcast(&ds->changed);
}

void holders_fail_job_locked(struct daemon_state *ds, struct job_entry *job, Squash__Status status,
			     const char *why, struct teardown *td)
{
	overlay_queue_teardown(job, td);
	for (size_t i = 0; i < job->count; i++) {
		sharing_put_locked(ds, job->images[i].merged, td);
		sharing_put_locked(ds, job->images[i].mount, td);
		job->images[i].merged = job->images[i].mount = NULL;
	}
	registry_job_set_failure(job, status, why);
}

/* Records image spec of e, held on m (one reference, the caller's;
 * dropped on failure). Lock not held. */
static enum result record_image(struct daemon_state *ds, const struct squashd_config *cfg,
				struct job_entry *e, const Squash__ImageSpec *spec,
				struct mount_entry *m, char *err, size_t errlen)
{
	pthread_mutex_lock(&ds->lock);
	/* Over the user's registry budget (registry/usage.h): refused for
	 * this user only. */
	bool over = registry_user_admit(&ds->registry, e->uid, spec->image, spec->target,
					cfg->registry_entries_per_user, cfg->registry_bytes_per_user,
					err, errlen) < 0 ||
		    (e->kind == HOLDER_SESSION &&
		     registry_user_admit_session_bind(&ds->registry, e->uid, cfg->max_session_binds_per_user,
						      err, errlen) < 0) ||
		    /* A session's bind of a FUSE mount is one more FUSE entry in
		     * the node's table. */
		    (e->kind == HOLDER_SESSION && m && m->key.mode == SQUASH__MOUNT_MODE__FUSE &&
		     user_fuse_mounts_refuses_locked(ds, cfg, e->uid, err, errlen));
	if (over || registry_user_add_image(e, spec->image, spec->target, m) < 0) {
		struct teardown td = TEARDOWN_INIT(cfg);
		sharing_put_locked(ds, m, &td);
		pthread_mutex_unlock(&ds->lock);
		sharing_teardown(ds, &td);
		if (over)
			return RESULT_USER_ERROR;
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	struct job_image *ji = &e->images[e->count - 1];
	ji->writable = spec->has_writable && spec->writable;
	if (e->kind == HOLDER_SESSION && m && m->key.mode == SQUASH__MOUNT_MODE__KERNEL)
		mount_note_session_uid(m, e->uid);
	if (spec->upper && ji->writable && !(ji->upper = strdup(spec->upper)))
		log_error("job %u: out of memory; image %s gets a discarded overlay", e->job_id, ji->image);
	pthread_mutex_unlock(&ds->lock);
	return RESULT_OK;
}

/* The images of images[] (not skipped) at images[first]'s target, in
 * option order, when first is the first of them and they are at least
 * two, all read-only: a group that may become one union. Returns how
 * many went to members (0: none to try). */
static size_t union_group(Squash__ImageSpec *const *images, size_t n, const bool *skip,
			  size_t first, size_t *members)
{
	size_t count = 0;

	for (size_t i = 0; i < n; i++) {
		if ((skip && skip[i]) || strcmp(images[i]->target, images[first]->target))
			continue;
		if (i < first || (images[i]->has_writable && images[i]->writable))
			return 0; /* not its first, or :rw (refused by core/merge.c) */
		members[count++] = i;
	}
	return count >= 2 ? count : 0;
}

/* Mounts a group (members of images[], option order) at one target: as one
 * union when all its images go to FUSE, else each on its own (their
 * overlay comes later, core/merge.h). Each image is opened once. */
static enum result add_group(struct daemon_state *ds, const struct squashd_config *cfg,
			     const struct identity *id, struct job_entry *e,
			     Squash__ImageSpec *const *images, const size_t *members, size_t count,
			     char *err, size_t errlen, long long deadline_ms)
{
	int *fds = malloc(count * sizeof(*fds));
	struct mount_key *keys = malloc(count * sizeof(*keys));
	size_t *layers = malloc(count * sizeof(*layers)), opened = 0, n_layers = 0;
	enum result res = fds && keys && layers ? RESULT_OK : RESULT_NODE_ERROR;
	bool all_fuse = true;

	if (res != RESULT_OK)
		snprintf(err, errlen, "out of memory");
	/* opened: how many fds hold a descriptor. */
	while (res == RESULT_OK && opened < count) {
		res = sharing_open(cfg, id, images[members[opened]], &fds[opened], &keys[opened], err,
				   errlen, deadline_ms);
		if (res == RESULT_OK && keys[opened++].mode != SQUASH__MOUNT_MODE__FUSE)
			all_fuse = false;
	}
	/* Trusted images too in a large group, when the site says so: their
	 * kernel mounts pin kernel memory per image (union_trusted_images). */
	if (res == RESULT_OK && (all_fuse || (cfg->union_trusted_images &&
					      count >= cfg->union_trusted_images)))
		n_layers = union_mount_layers(keys, count, layers);
	if (res == RESULT_OK && n_layers >= 2) {
		/* The layers' descriptors and keys, bottom first, as the user's
		 * reader reads them all (FUSE keys of the user); the other
		 * (repeated) images' descriptors close here. */
		for (size_t k = 0, l = 0; k < count; k++) {
			if (l < n_layers && layers[l] == k) {
				fds[l] = fds[k];
				keys[l] = keys[k];
				keys[l].mode = SQUASH__MOUNT_MODE__FUSE;
				keys[l++].owner_uid = id->uid;
			} else {
				close_detached(id->uid, fds[k]); /* FLUSH: its server may hang */
			}
		}
		struct mount_entry *m = NULL;
		res = union_mount_get(ds, cfg, id, fds, keys, n_layers,
				      images[members[count - 1]]->image, images[members[0]]->target, &m,
				      err, errlen, deadline_ms);
		opened = 0; /* closed by union_mount_get */
		if (res == RESULT_OK) {
			pthread_mutex_lock(&ds->lock);
			m->refcount += (unsigned)count - 1; /* one per image of the group */
			pthread_mutex_unlock(&ds->lock);
			size_t k = 0;
			while (k < count && res == RESULT_OK)
				res = record_image(ds, cfg, e, images[members[k++]], m, err, errlen);
			if (k < count) {
				/* record_image failed (and dropped its own): the
				 * references not recorded go too. */
				struct teardown td = TEARDOWN_INIT(cfg);
				pthread_mutex_lock(&ds->lock);
				for (; k < count; k++)
					sharing_put_locked(ds, m, &td);
				pthread_mutex_unlock(&ds->lock);
				sharing_teardown(ds, &td);
			}
		}
	} else {
		/* One by one: sharing_get_opened closes each descriptor. */
		for (size_t k = 0; k < opened; k++) {
			struct mount_entry *m = NULL;
			if (res == RESULT_OK)
				res = sharing_get_opened(ds, cfg, id, images[members[k]], fds[k], &keys[k], &m,
							 err, errlen, deadline_ms);
			else
				close_detached(id->uid, fds[k]);
			if (res == RESULT_OK)
				res = record_image(ds, cfg, e, images[members[k]], m, err, errlen);
		}
		opened = 0;
	}
	for (size_t k = 0; k < opened; k++)
		close_detached(id->uid, fds[k]);
	free(fds);
	free(keys);
	free(layers);
	return res;
}

enum result holders_mount_images(struct daemon_state *ds, const struct squashd_config *cfg,
				 struct job_entry *e, uid_t uid, Squash__ImageSpec *const *images,
				 size_t n, const bool *skip, char *err, size_t errlen,
				 long long deadline_ms)
{
	struct identity *id = malloc(sizeof(*id));
	size_t *members = malloc((n ? n : 1) * sizeof(*members));
	bool *done = calloc(n ? n : 1, sizeof(*done));
	enum result res;

	if (!id || !members || !done) {
		free(id);
		free(members);
		free(done);
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	res = identity_lookup(uid, id, err, errlen);
	bool unions = res == RESULT_OK && union_mount_wanted(ds, cfg, id);
	for (size_t i = 0; res == RESULT_OK && i < n; i++) {
		if ((skip && skip[i]) || done[i])
			continue;
		/* Overlays belong to a job's prolog and release (overlay.h). */
		if (e->kind != HOLDER_JOB && images[i]->has_writable && images[i]->writable) {
			snprintf(err, errlen, "image %s: :rw is only for a job's own images (sbatch, salloc, "
				 "or an srun that creates the job); a step's or squash-shell's images are "
				 "read-only", images[i]->image);
			res = RESULT_USER_ERROR;
			break;
		}
		size_t count = unions ? union_group(images, n, skip, i, members) : 0;
		if (count) {
			for (size_t k = 0; k < count; k++)
				done[members[k]] = true;
			res = add_group(ds, cfg, id, e, images, members, count, err, errlen, deadline_ms);
			continue;
		}
		struct mount_entry *m = NULL;
		res = sharing_get(ds, cfg, id, images[i], &m, err, errlen, deadline_ms);
		if (res == RESULT_OK)
			res = record_image(ds, cfg, e, images[i], m, err, errlen);
	}
	free(id);
	free(members);
	free(done);
	/* Images at one target not in a union: their merged tree (core/merge.h). */
	if (res == RESULT_OK)
		res = merge_mount_groups(ds, cfg, e, err, errlen, deadline_ms);
	return res;
}

void holders_drop_locked(struct daemon_state *ds, struct job_entry *e, struct teardown *td)
{
	if (e->kind == HOLDER_JOB)
		overlay_queue_teardown(e, td);
	if (e->kind == HOLDER_SESSION && !e->pending)
		sessions_queue_unbind(ds, e->session_pid, td);
	for (size_t i = 0; i < e->count; i++) {
		sharing_put_locked(ds, e->images[i].merged, td);
		sharing_put_locked(ds, e->images[i].mount, td);
	}
	if (e->kind == HOLDER_JOB)
		registry_remove_job(&ds->registry, e);
	else
		registry_remove_scoped(&ds->registry, e);
}

enum holder_release holders_release_job_locked(struct daemon_state *ds, uint32_t job_id,
					       struct teardown *td)
{
	struct job_entry *job = registry_find_job(&ds->registry, job_id);
	enum holder_release r = !job ? HOLDER_UNKNOWN : job->pending ? HOLDER_PENDING : HOLDER_RELEASED;
	unsigned steps = 0;

	if (r == HOLDER_RELEASED)
		holders_drop_locked(ds, job, td);
	for (struct job_entry *e = ds->registry.scoped, *next; e; e = next) {
		next = e->next;
		if (e->kind != HOLDER_STEP || e->job_id != job_id || e->pending)
			continue;
		log_info("step %u.%u released with its job", e->job_id, e->step_id);
		holders_drop_locked(ds, e, td);
		steps++;
	}
	if (r == HOLDER_RELEASED || steps) {
		daemon_save_locked(ds);
		pthread_cond_broadcast(&ds->changed);
	}
	return r;
}

enum holder_release holders_release_step_locked(struct daemon_state *ds, uint32_t job_id,
						uint32_t step_id, struct teardown *td)
{
	struct job_entry *e = registry_find_step(&ds->registry, job_id, step_id);

	if (!e)
		return HOLDER_UNKNOWN;
	if (e->pending)
		return HOLDER_PENDING;
	holders_drop_locked(ds, e, td);
	daemon_save_locked(ds);
	pthread_cond_broadcast(&ds->changed);
	return HOLDER_RELEASED;
}

/* Whether peer_uid may see e: root sees every entry, a user their own. */
static bool visible_to(const struct job_entry *e, uid_t peer_uid)
{
	return peer_uid == 0 || e->uid == peer_uid;
}

struct job_entry *holders_settled_job_locked(struct daemon_state *ds, uint32_t job_id, uid_t peer_uid,
					     long long deadline_ms)
{
	struct job_entry *job = registry_find_job(&ds->registry, job_id);
	while (job && visible_to(job, peer_uid) && job->pending && daemon_wait_locked(ds, deadline_ms))
		job = registry_find_job(&ds->registry, job_id);
	return job && visible_to(job, peer_uid) ? job : NULL;
}

struct job_entry *holders_settled_step_locked(struct daemon_state *ds, uint32_t job_id,
					      uint32_t step_id, uid_t peer_uid, long long deadline_ms)
{
	struct job_entry *e = registry_find_step(&ds->registry, job_id, step_id);
	while (e && visible_to(e, peer_uid) && e->pending && daemon_wait_locked(ds, deadline_ms))
		e = registry_find_step(&ds->registry, job_id, step_id);
	return e && visible_to(e, peer_uid) ? e : NULL;
}

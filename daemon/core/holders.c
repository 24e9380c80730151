#include "config.h"
#include "core/holders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/merge.h"
#include "core/overlay.h"
#include "core/sessions.h"
#include "core/sharing.h"
#include "process/identity.h"
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

/* Records one image mounted for e (lock not held). */
static enum result add_image(struct daemon_state *ds, const struct squashd_config *cfg,
			     const struct identity *id, struct job_entry *e,
			     const Squash__ImageSpec *spec, char *err, size_t errlen, long long deadline_ms)
{
	struct mount_entry *m = NULL;
	enum result res = sharing_get(ds, cfg, id, spec, &m, err, errlen, deadline_ms);

	if (res != RESULT_OK)
		return res;
	pthread_mutex_lock(&ds->lock);
	if (registry_job_add_image(e, spec->image, spec->target, m) < 0) {
		struct teardown td = TEARDOWN_INIT(cfg);
		sharing_put_locked(ds, m, &td);
		pthread_mutex_unlock(&ds->lock);
		sharing_teardown(ds, &td);
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	struct job_image *ji = &e->images[e->count - 1];
	ji->writable = spec->has_writable && spec->writable;
	if (spec->upper && ji->writable && !(ji->upper = strdup(spec->upper)))
		log_error("job %u: out of memory; image %s gets a discarded overlay", e->job_id, ji->image);
	pthread_mutex_unlock(&ds->lock);
	return RESULT_OK;
}

enum result holders_mount_images(struct daemon_state *ds, const struct squashd_config *cfg,
				 struct job_entry *e, uid_t uid, Squash__ImageSpec *const *images,
				 size_t n, const bool *skip, char *err, size_t errlen,
				 long long deadline_ms)
{
	struct identity *id = malloc(sizeof(*id));
	enum result res;

	if (!id) {
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	res = identity_lookup(uid, id, err, errlen);
	for (size_t i = 0; res == RESULT_OK && i < n; i++) {
		if (skip && skip[i])
			continue;
		/* Overlays belong to a job's prolog and release (overlay.h). */
		if (e->kind != HOLDER_JOB && images[i]->has_writable && images[i]->writable) {
			snprintf(err, errlen, "image %s: :rw is only for a job's own images (sbatch, salloc, "
				 "or an srun that creates the job); a step's or squash-shell's images are "
				 "read-only", images[i]->image);
			res = RESULT_USER_ERROR;
			break;
		}
		res = add_image(ds, cfg, id, e, images[i], err, errlen, deadline_ms);
	}
	free(id);
	/* Images at one target: their merged tree (core/merge.h). */
	if (res == RESULT_OK)
		res = merge_mount_groups(ds, cfg, e, err, errlen, deadline_ms);
	return res;
}

void holders_drop_locked(struct daemon_state *ds, struct job_entry *e, struct teardown *td)
{
	if (e->kind == HOLDER_JOB)
		overlay_queue_teardown(e, td);
	if (e->kind == HOLDER_SESSION && !e->pending)
		sessions_unbind(ds, e->session_pid);
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

struct job_entry *holders_settled_job_locked(struct daemon_state *ds, uint32_t job_id,
					     long long deadline_ms)
{
	struct job_entry *job = registry_find_job(&ds->registry, job_id);
	while (job && job->pending && daemon_wait_locked(ds, deadline_ms))
		job = registry_find_job(&ds->registry, job_id);
	return job;
}

struct job_entry *holders_settled_step_locked(struct daemon_state *ds, uint32_t job_id,
					      uint32_t step_id, long long deadline_ms)
{
	struct job_entry *e = registry_find_step(&ds->registry, job_id, step_id);
	while (e && e->pending && daemon_wait_locked(ds, deadline_ms))
		e = registry_find_step(&ds->registry, job_id, step_id);
	return e;
}

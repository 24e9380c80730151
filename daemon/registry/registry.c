#include "config.h"
#include "registry/registry.h"

#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "array_grow.h"
#include "mount/fuse_keep.h"

bool mount_key_equal(const struct mount_key *a, const struct mount_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
	       a->mode == b->mode && a->owner_uid == b->owner_uid;
}

static bool shareable(const struct mount_entry *m)
{
	return m->state == MOUNT_MOUNTING || m->state == MOUNT_READY || m->state == MOUNT_LINGERING;
}

void mount_note_session_uid(struct mount_entry *m, uid_t uid)
{
	for (unsigned i = 0; i < m->n_session_uids; i++)
		if (m->session_uids[i] == uid)
			return;
	if (m->n_session_uids < MOUNT_SESSION_UIDS)
		m->session_uids[m->n_session_uids++] = uid;
}

struct mount_entry *registry_find_mount(struct registry *r, const struct mount_key *key)
{
	for (struct mount_entry *m = r->mounts; m; m = m->next)
		if (shareable(m) && m->n_parts == 0 && mount_key_equal(&m->key, key))
			return m;
	return NULL;
}

struct mount_entry *registry_find_union(struct registry *r, uid_t owner,
					const struct mount_key *parts, size_t n)
{
	for (struct mount_entry *m = r->mounts; m; m = m->next) {
		bool same = shareable(m) && m->n_parts == n && n > 0 && m->key.owner_uid == owner;

		for (size_t i = 0; same && i < n; i++)
			same = mount_key_equal(&m->parts[i], &parts[i]);
		if (same)
			return m;
	}
	return NULL;
}

int registry_set_parts(struct mount_entry *m, const struct mount_key *parts, size_t n)
{
	struct mount_key *copy = malloc((n ? n : 1) * sizeof(*copy));

	if (!copy)
		return -1;
	memcpy(copy, parts, n * sizeof(*copy));
	free(m->parts);
	m->parts = copy;
	m->n_parts = n;
	return 0;
}

struct mount_entry *registry_mount_by_id(struct registry *r, unsigned id)
{
	for (struct mount_entry *m = r->mounts; m; m = m->next)
		if (m->id == id)
			return m;
	return NULL;
}

struct mount_entry *registry_find_merged(struct registry *r, struct mount_entry *const *lowers,
					 size_t n)
{
	for (struct mount_entry *m = r->mounts; m; m = m->next)
		if (shareable(m) &&
		    m->n_lowers == n && n > 0 && !memcmp(m->lowers, lowers, n * sizeof(*lowers)))
			return m;
	return NULL;
}

int registry_set_lowers(struct mount_entry *m, struct mount_entry *const *lowers, size_t n)
{
	struct mount_entry **copy = malloc((n ? n : 1) * sizeof(*copy));

	if (!copy)
		return -1;
	memcpy(copy, lowers, n * sizeof(*copy));
	free(m->lowers);
	m->lowers = copy;
	m->n_lowers = n;
	return 0;
}

struct mount_entry *registry_add_mount(struct registry *r, const struct mount_key *key,
				       const char *image, const char *mount_point)
{
	struct mount_entry *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->key = *key;
	m->image = strdup(image);
	m->mount_point = strdup(mount_point);
	if (!m->image || !m->mount_point) {
		free(m->image);
		free(m->mount_point);
		free(m);
		return NULL;
	}
	m->id = ++r->next_mount_id;
	m->server_pidfd = -1;
	m->state = MOUNT_READY;
	m->next = r->mounts;
	r->mounts = m;
	return m;
}

struct mount_entry *registry_new_mount(struct registry *r, const struct mount_key *key,
				       const char *image, const char *mount_dir)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/m%u", mount_dir, r->next_mount_id + 1) >= (int)sizeof(path))
		return NULL;
	struct mount_entry *m = registry_add_mount(r, key, image, path);
	if (m)
		m->state = MOUNT_MOUNTING;
	return m;
}

static void free_mount(struct mount_entry *m)
{
	if (m->server_pidfd >= 0)
		close(m->server_pidfd);
	fuse_keep_free(m->keep);
	free(m->failure);
	free(m->state_extra);
	free(m->image);
	free(m->mount_point);
	free(m->lowers);
	free(m->parts);
	free(m);
}

void registry_remove_mount(struct registry *r, struct mount_entry *m)
{
	for (struct mount_entry **p = &r->mounts; *p; p = &(*p)->next) {
		if (*p == m) {
			*p = m->next;
			free_mount(m);
			return;
		}
	}
}

struct job_entry *registry_find_job(struct registry *r, uint32_t job_id)
{
	for (struct job_entry *j = r->jobs; j; j = j->next)
		if (j->job_id == job_id)
			return j;
	return NULL;
}

/* A new entry without images, at the head of *list. */
static struct job_entry *push_entry(struct job_entry **list, enum holder_kind kind,
				    uint32_t job_id, uint32_t step_id, uid_t uid)
{
	struct job_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->kind = kind;
	e->job_id = job_id;
	e->step_id = step_id;
	e->uid = uid;
	e->status = SQUASH__STATUS__OK;
	e->next = *list;
	*list = e;
	return e;
}

struct job_entry *registry_add_job(struct registry *r, uint32_t job_id, uid_t uid)
{
	return push_entry(&r->jobs, HOLDER_JOB, job_id, 0, uid);
}

int registry_job_add_image(struct job_entry *job, const char *image,
			   const char *target, struct mount_entry *m)
{
	if (job->count >= SQUASH_MAX_IMAGES)
		return -1;
	if (array_reserve(&job->images, &job->cap, job->count + 1, sizeof(*job->images), 4) < 0)
		return -1;
	memset(&job->images[job->count], 0, sizeof(*job->images));
	struct job_image *ji = &job->images[job->count];
	ji->image = strdup(image);
	ji->target = strdup(target);
	if (!ji->image || !ji->target) {
		free(ji->image);
		free(ji->target);
		ji->image = ji->target = NULL;
		return -1;
	}
	ji->mount = m;
	job->count++;
	job->state_bytes = 0;
	return 0;
}

int registry_job_set_failure(struct job_entry *job, Squash__Status status,
			     const char *message)
{
	char *copy = strdup(message);
	if (!copy)
		return -1;
	free(job->message);
	job->message = copy;
	job->status = status;
	job->state_bytes = 0;
	return 0;
}

static void free_job(struct job_entry *j)
{
	for (size_t i = 0; i < j->count; i++) {
		free(j->images[i].image);
		free(j->images[i].target);
		free(j->images[i].overlay);
		free(j->images[i].upper);
	}
	free(j->images);
	free(j->overlay_dir);
	free(j->state_extra);
	free(j->message);
	free(j);
}

void registry_remove_job(struct registry *r, struct job_entry *job)
{
	for (struct job_entry **p = &r->jobs; *p; p = &(*p)->next) {
		if (*p == job) {
			*p = job->next;
			free_job(job);
			return;
		}
	}
}

struct job_entry *registry_find_step(struct registry *r, uint32_t job_id, uint32_t step_id)
{
	for (struct job_entry *e = r->scoped; e; e = e->next)
		if (e->kind == HOLDER_STEP && e->job_id == job_id && e->step_id == step_id)
			return e;
	return NULL;
}

struct job_entry *registry_find_session(struct registry *r, pid_t pid)
{
	for (struct job_entry *e = r->scoped; e; e = e->next)
		if (e->kind == HOLDER_SESSION && e->session_pid == pid)
			return e;
	return NULL;
}

struct job_entry *registry_add_scoped(struct registry *r, enum holder_kind kind, uint32_t job_id,
				      uint32_t step_id, uid_t uid)
{
	return push_entry(&r->scoped, kind, job_id, step_id, uid);
}

void registry_remove_scoped(struct registry *r, struct job_entry *e)
{
	for (struct job_entry **p = &r->scoped; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			free_job(e);
			return;
		}
	}
}

size_t registry_mount_owners(const struct registry *r, bool (*picks)(const struct mount_entry *m),
			     uid_t **out)
{
	size_t n = 0, cap = 0;

	*out = NULL;
	for (const struct mount_entry *m = r->mounts; m; m = m->next) {
		size_t i;

		if (!picks(m))
			continue;
		for (i = 0; i < n && (*out)[i] != m->key.owner_uid; i++)
			;
		if (i < n)
			continue;
		if (array_reserve(out, &cap, n + 1, sizeof(**out), 16) < 0)
			break;
		(*out)[n++] = m->key.owner_uid;
	}
	return n;
}

unsigned registry_user_mounts(struct registry *r, uid_t uid, bool (*counts)(const struct mount_entry *m))
{
	/* Under the caller's lock, as the marks are. */
	static unsigned mark;
	struct job_entry *lists[] = { r->jobs, r->scoped };
	unsigned n = 0;

	if (++mark == 0) {
		for (struct mount_entry *m = r->mounts; m; m = m->next)
			m->count_mark = 0;
		mark = 1;
	}
	for (size_t l = 0; l < 2; l++)
		for (const struct job_entry *j = lists[l]; j; j = j->next) {
			if (j->uid != uid)
				continue;
			for (size_t i = 0; i < j->count; i++) {
				struct mount_entry *held[] = { j->images[i].mount, j->images[i].merged };

				for (size_t k = 0; k < 2; k++)
					if (held[k] && counts(held[k]) && held[k]->count_mark != mark) {
						held[k]->count_mark = mark;
						n++;
					}
			}
		}
	/* Being made for uid, not yet recorded with a holder. */
	for (struct mount_entry *m = r->mounts; m; m = m->next)
		if (m->state == MOUNT_MOUNTING && counts(m) && m->mounting_for == uid && m->count_mark != mark) {
			m->count_mark = mark;
			n++;
		}
	return n;
}

bool registry_job_uses(const struct job_entry *job, const struct mount_entry *m)
{
	for (size_t i = 0; i < job->count; i++)
		if (job->images[i].mount == m || job->images[i].merged == m)
			return true;
	return false;
}

void registry_free(struct registry *r)
{
	while (r->jobs)
		registry_remove_job(r, r->jobs);
	while (r->scoped)
		registry_remove_scoped(r, r->scoped);
	while (r->mounts)
		registry_remove_mount(r, r->mounts);
	r->next_mount_id = 0;
	free(r->state_extra);
	r->state_extra = NULL;
}

int registry_overlay_path(char *buf, size_t len, const char *dir, char kind, size_t i)
{
	return snprintf(buf, len, "%s/%c%zu", dir, kind, i) >= (int)len ? -1 : 0;
}

unsigned registry_overlay_mask(const struct job_entry *job)
{
	unsigned mask = 0;
	/* Writable images are among the first 32 (core/overlay.c refuses others). */
	for (size_t i = 0; i < job->count && i < 32; i++)
		if (job->images[i].overlay)
			mask |= 1u << i;
	return mask;
}

int registry_overlay_restore(struct job_entry *job, const char *dir, unsigned mask)
{
	char point[PATH_MAX];

	if (job->overlay_dir || !*dir || (job->count < 32 && mask >> job->count))
		return -1;
	if (!(job->overlay_dir = strdup(dir)))
		return -1;
	for (size_t i = 0; i < job->count && i < 32; i++) {
		if (!(mask & (1u << i)))
			continue;
		job->images[i].writable = true;
		if (registry_overlay_path(point, sizeof(point), dir, 'o', i) ||
		    !(job->images[i].overlay = strdup(point)))
			return -1;
	}
	return 0;
}

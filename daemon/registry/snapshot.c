/* A copy of what the state file keeps (snapshot.h). */
#include "config.h"
#include "registry/snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "registry/state_file.h"

struct mount_pair {
	const struct mount_entry *from;
	struct mount_entry *to;
};

static int by_from(const void *a, const void *b)
{
	const struct mount_entry *x = ((const struct mount_pair *)a)->from, *y = ((const struct mount_pair *)b)->from;
	return x < y ? -1 : x > y;
}

/* The copy of m, or NULL when the snapshot does not hold it. */
static struct mount_entry *copy_of(const struct mount_pair *pairs, size_t n, const struct mount_entry *m)
{
	struct mount_pair key = { .from = m };
	const struct mount_pair *p = m ? bsearch(&key, pairs, n, sizeof(*pairs), by_from) : NULL;
	return p ? p->to : NULL;
}

static int copy_str(char **to, const char *from)
{
	return !from || (*to = strdup(from)) ? 0 : -1;
}

static int copy_mount(struct registry *s, const struct mount_entry *m, struct mount_pair *pair)
{
	struct mount_entry *c = registry_add_mount(s, &m->key, m->image, m->mount_point);
	if (!c)
		return -1;
	c->id = m->id;
	c->state = m->state;
	c->server_pid = m->server_pid;
	c->linger_until_ms = m->linger_until_ms;
	memcpy(c->loop_device, m->loop_device, sizeof(c->loop_device));
	pair->from = m;
	pair->to = c;
	if (m->n_parts && registry_set_parts(c, m->parts, m->n_parts) < 0)
		return -1;
	return copy_str(&c->state_extra, m->state_extra);
}

static int copy_entry(struct registry *s, const struct job_entry *e, const struct mount_pair *pairs,
		      size_t n)
{
	struct job_entry *c = e->kind == HOLDER_JOB ? registry_add_job(s, e->job_id, e->uid) :
			      registry_add_scoped(s, e->kind, e->job_id, e->step_id, e->uid);
	if (!c)
		return -1;
	c->status = e->status;
	c->ends_with_extern = e->ends_with_extern;
	c->session_pid = e->session_pid;
	c->session_start = e->session_start;
	if (copy_str(&c->message, e->message) || copy_str(&c->overlay_dir, e->overlay_dir) ||
	    copy_str(&c->state_extra, e->state_extra))
		return -1;
	for (size_t i = 0; i < e->count; i++) {
		const struct job_image *ji = &e->images[i];
		if (registry_job_add_image(c, ji->image, ji->target, copy_of(pairs, n, ji->mount)) < 0)
			return -1;
		c->images[i].writable = ji->writable;
		if (copy_str(&c->images[i].overlay, ji->overlay) || copy_str(&c->images[i].upper, ji->upper))
			return -1;
	}
	return 0;
}

/* Lists come out reversed (entries are added at the head): put them
 * back in order, so the file lists them as the registry does. */
static void reverse_entries(struct job_entry **list)
{
	struct job_entry *done = NULL;
	while (*list) {
		struct job_entry *e = *list;
		*list = e->next;
		e->next = done;
		done = e;
	}
	*list = done;
}

struct registry *registry_snapshot(const struct registry *r)
{
	struct registry *s = calloc(1, sizeof(*s));
	size_t n = 0, cap = 0;
	struct mount_pair *pairs = NULL;
	int rc = s ? copy_str(&s->state_extra, r->state_extra) : -1;

	for (const struct mount_entry *m = r->mounts; m; m = m->next)
		cap += state_file_keeps_mount(m);
	if (rc == 0 && !(pairs = malloc((cap ? cap : 1) * sizeof(*pairs))))
		rc = -1;
	for (const struct mount_entry *m = r->mounts; rc == 0 && m; m = m->next)
		if (state_file_keeps_mount(m))
			rc = copy_mount(s, m, &pairs[n++]);
	if (rc == 0)
		qsort(pairs, n, sizeof(*pairs), by_from);
	/* A merged mount's lowers: the copies it keeps. */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct mount_entry *m = pairs[i].from;
		struct mount_entry **lowers = m->n_lowers ? malloc(m->n_lowers * sizeof(*lowers)) : NULL;
		size_t k = 0;
		if (m->n_lowers && !lowers) {
			rc = -1;
			break;
		}
		for (size_t j = 0; j < m->n_lowers; j++)
			if ((lowers[k] = copy_of(pairs, n, m->lowers[j])))
				k++;
		if (m->n_lowers)
			rc = registry_set_lowers(pairs[i].to, lowers, k);
		free(lowers);
	}
	const struct job_entry *lists[] = { r->jobs, r->scoped };
	for (size_t l = 0; l < 2; l++)
		for (const struct job_entry *e = lists[l]; rc == 0 && e; e = e->next)
			if (state_file_keeps_entry(e))
				rc = copy_entry(s, e, pairs, n);
	free(pairs);
	if (rc < 0) {
		if (s)
			registry_free(s);
		free(s);
		return NULL;
	}
	s->next_mount_id = r->next_mount_id;
	reverse_entries(&s->jobs);
	reverse_entries(&s->scoped);
	struct mount_entry *done = NULL;
	while (s->mounts) {
		struct mount_entry *m = s->mounts;
		s->mounts = m->next;
		m->next = done;
		done = m;
	}
	s->mounts = done;
	return s;
}

void registry_snapshot_free(struct registry *s)
{
	if (!s)
		return;
	registry_free(s);
	free(s);
}

/* Per-user registry budgets (usage.h). */
#include "config.h"
#include "registry/usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/state_file.h"

struct registry_usage registry_user_usage(struct registry *r, uid_t uid)
{
	struct registry_usage u = { 0, 0, 0 };
	struct job_entry *lists[] = { r->jobs, r->scoped };

	for (size_t l = 0; l < 2; l++)
		for (struct job_entry *e = lists[l]; e; e = e->next)
			if (e->uid == uid) {
				/* Counted once per change (registry.c resets it), so
				 * a check formats only the entry that changed. */
				if (!e->state_bytes)
					e->state_bytes = state_file_entry_bytes(e);
				u.entries++;
				u.bytes += e->state_bytes;
				if (e->kind == HOLDER_SESSION)
					u.session_binds += e->count;
			}
	return u;
}

int registry_user_add_image(struct job_entry *e, const char *image, const char *target,
			    struct mount_entry *m)
{
	size_t counted = e->state_bytes;

	if (registry_job_add_image(e, image, target, m) < 0)
		return -1;
	/* The new record's bytes added to what was counted: counted again
	 * from nothing, a request's budget check per image would format every
	 * record before it again, under the lock (n²/2 for n images). */
	if (counted)
		e->state_bytes = counted + state_file_image_bytes(e, e->count - 1);
	return 0;
}

int registry_user_admit(struct registry *r, uid_t uid, const char *image, const char *target,
			size_t max_entries, unsigned long long max_bytes, char *why, size_t len)
{
	struct registry_usage u = registry_user_usage(r, uid);
	/* The image record to come, at its largest: "image JOB MOUNT" and
	 * both paths escaped. */
	size_t add = 40 + STATE_FILE_ESCAPE_MAX * (strlen(image) + strlen(target));

	if (u.entries > max_entries) {
		snprintf(why, len, "squashd on this node holds %zu jobs, steps and sessions of this user, more "
			 "than registry_entries_per_user = %zu (squashd.conf); end some, or ask the admin",
			 u.entries, max_entries);
		return -1;
	}
	if (u.bytes + add > max_bytes) {
		snprintf(why, len, "this user's images take %zu bytes of squashd's registry on this node; one "
			 "more would pass registry_bytes_per_user = %llu (squashd.conf); end some jobs or "
			 "steps, or use shorter paths", u.bytes, max_bytes);
		return -1;
	}
	return 0;
}

int registry_user_admit_session_bind(struct registry *r, uid_t uid, size_t max, char *why, size_t len)
{
	size_t binds = 0;

	if (uid == 0 || max == 0)
		return 0;
	for (const struct job_entry *e = r->scoped; e; e = e->next)
		if (e->kind == HOLDER_SESSION && e->uid == uid)
			binds += e->count;
	if (binds < max)
		return 0;
	snprintf(why, len, "the squash-shell sessions of this user on this node already bind %zu images, "
		 "as many as max_session_binds_per_user = %zu (squashd.conf) allows: end some sessions, "
		 "or ask the admin", binds, max);
	return -1;
}

static int by_uid(const void *a, const void *b)
{
	uid_t x = ((const struct job_entry *const *)a)[0]->uid, y = ((const struct job_entry *const *)b)[0]->uid;
	return x < y ? -1 : x > y;
}

int registry_usage_each_user(struct registry *r, registry_usage_fn fn, void *arg)
{
	struct job_entry *lists[] = { r->jobs, r->scoped };
	size_t n = 0;

	for (size_t l = 0; l < 2; l++)
		for (struct job_entry *e = lists[l]; e; e = e->next)
			n++;
	struct job_entry **all = malloc((n ? n : 1) * sizeof(*all));
	if (!all)
		return -1;
	/* The entries sorted by user, then summed per user. */
	n = 0;
	for (size_t l = 0; l < 2; l++)
		for (struct job_entry *e = lists[l]; e; e = e->next) {
			if (!e->state_bytes)
				e->state_bytes = state_file_entry_bytes(e);
			all[n++] = e;
		}
	qsort(all, n, sizeof(*all), by_uid);
	for (size_t i = 0; i < n;) {
		struct registry_usage u = { 0, 0, 0 };
		uid_t uid = all[i]->uid;

		for (; i < n && all[i]->uid == uid; i++) {
			u.entries++;
			u.bytes += all[i]->state_bytes;
			if (all[i]->kind == HOLDER_SESSION)
				u.session_binds += all[i]->count;
		}
		fn(arg, uid, u);
	}
	free(all);
	return 0;
}

/* A mount's record in the state file at its largest: its numbers, and its
 * paths escaped. */
static size_t mount_record_bytes(const struct mount_entry *m)
{
	return 96 + STATE_FILE_ESCAPE_MAX * (strlen(m->mount_point) + strlen(m->image) +
					     strlen(m->loop_device));
}

bool registry_user_may_linger(struct registry *r, const struct mount_entry *m, size_t max_entries,
			      unsigned long long max_bytes)
{
	uid_t uid = m->key.owner_uid;

	if (m->key.mode != SQUASH__MOUNT_MODE__FUSE || uid == MOUNT_OWNER_ANY || uid == 0)
		return true;
	struct registry_usage u = registry_user_usage(r, uid);
	size_t entries = u.entries + 1;
	unsigned long long bytes = u.bytes + mount_record_bytes(m);

	for (const struct mount_entry *o = r->mounts; o; o = o->next)
		if (o != m && o->state == MOUNT_LINGERING && o->key.owner_uid == uid &&
		    o->key.mode == SQUASH__MOUNT_MODE__FUSE) {
			entries++;
			bytes += mount_record_bytes(o);
		}
	return entries <= max_entries && bytes <= max_bytes;
}

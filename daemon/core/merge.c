#include "config.h"
#include "core/merge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "core/given_up_mounts.h"
#include "core/merged_budget.h"
#include "core/sharing.h"
#include "mount/overlay_lowers.h"
#include "util/log.h"

struct lowers {
	struct mount_entry **m;
	size_t n;
};

/* The overlay of a merge, made where the request can give up on it: over
 * FUSE lowers the mount asks each user's reader (STATFS, LOOKUP), and a
 * stopped reader would hold the request, and its worker, for ever. */
struct merge_mount {
	char *point;
	char **paths;
	size_t n;
	enum result res;
	char why[1024];
};

static void merge_mount_free(void *arg)
{
	struct merge_mount *mm = arg;

	if (!mm)
		return;
	for (size_t i = 0; mm->paths && i < mm->n; i++)
		free(mm->paths[i]);
	free(mm->paths);
	free(mm->point);
	free(mm);
}

static struct merge_mount *merge_mount_new(const struct mount_entry *m, const struct lowers *l)
{
	struct merge_mount *mm = calloc(1, sizeof(*mm));
	bool ok = mm && (mm->point = strdup(m->mount_point)) &&
		  (mm->paths = calloc(l->n, sizeof(*mm->paths)));

	for (size_t i = 0; ok && i < l->n; i++, mm->n++)
		ok = (mm->paths[i] = strdup(l->m[i]->mount_point)) != NULL;
	if (!ok) {
		merge_mount_free(mm);
		return NULL;
	}
	return mm;
}

static void merge_mount_call(void *arg)
{
	struct merge_mount *mm = arg;

	mm->res = overlay_mount_lowers(mm->point, (const char *const *)mm->paths, mm->n, mm->why,
				       sizeof(mm->why));
}

/* The request gave up: what the call made after all goes again (its
 * mount point's name, mN, is never given out twice). */
static void merge_mount_late(void *arg)
{
	struct merge_mount *mm = arg;

	if (mm->res == RESULT_OK && umount2(mm->point, MNT_DETACH) < 0)
		log_warning("cannot detach the merged overlay %s its request gave up on: %s", mm->point,
			    strerror(errno));
	rmdir(mm->point);
	log_info("the merged overlay %s that a request gave up on has %s", mm->point,
		 mm->res == RESULT_OK ? "been made and detached again" : "failed");
}

/* Kills the FUSE servers of l's lowers (lock held): one did not answer.
 * Their mounts then recover as after any reader's death (a new reader on
 * the kept connection, or a dead mount that the next job mounts again). */
static unsigned kill_lower_servers_locked(const struct lowers *l)
{
	unsigned killed = 0;

	for (size_t i = 0; i < l->n; i++) {
		int pidfd = l->m[i]->server_pidfd;

		if (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) == 0) {
			log_warning("killed FUSE server pid %d of image %s: it did not answer the merge's "
				    "overlay mount in time", (int)l->m[i]->server_pid, l->m[i]->image);
			killed++;
		}
	}
	return killed;
}

/* Whether a lower is a FUSE mount: a user's server answers the overlay's
 * mount then, and the merge is that user's alone (FUSE mounts are shared
 * by one user's jobs only). */
static bool fuse_lower(const struct lowers *l)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->m[i]->key.mode == SQUASH__MOUNT_MODE__FUSE)
			return true;
	return false;
}

/* The lowers of the group at target (bottom first, in option order): an
 * image named twice counts where it is named last (it is on top there
 * anyway). The indexes of the group's images go to members. */
static size_t group_of(const struct job_entry *e, const char *target, struct lowers *out,
		       size_t *members)
{
	size_t count = 0;

	out->n = 0;
	for (size_t i = 0; i < e->count; i++) {
		if (strcmp(e->images[i].target, target))
			continue;
		members[count++] = i;
		struct mount_entry *m = e->images[i].mount;
		size_t k = 0;
		while (k < out->n && out->m[k] != m)
			k++;
		if (k < out->n)
			memmove(out->m + k, out->m + k + 1, (out->n - k - 1) * sizeof(*out->m)), out->n--;
		out->m[out->n++] = m;
	}
	return count;
}

static struct mount_entry *find_merged(struct registry *r, const void *what)
{
	const struct lowers *l = what;

	return registry_find_merged(r, l->m, l->n);
}

/* A new merged mount of l made for uid (lock held): MOUNTING, one
 * reference for the caller, one on each lower. */
static struct mount_entry *new_merged_locked(struct daemon_state *ds, const struct lowers *l, uid_t uid)
{
	struct mount_key key = { .mode = MOUNT_MODE_MERGED, .owner_uid = MOUNT_OWNER_ANY };
	char label[SQUASH_PATH_MAX + 64];

	snprintf(label, sizeof(label), "%s (+%zu merged)", l->m[l->n - 1]->image, l->n - 1);
	struct mount_entry *m = registry_new_mount(&ds->registry, &key, label, ds->mount_dir);
	if (!m)
		return NULL;
	if (registry_set_lowers(m, l->m, l->n) < 0) {
		registry_remove_mount(&ds->registry, m);
		return NULL;
	}
	for (size_t i = 0; i < l->n; i++)
		l->m[i]->refcount++;
	m->refcount = 1;
	m->mounting_for = uid;
	return m;
}

/* Mounts or shares the merged mount of l for uid; *out gets one
 * reference. */
static enum result get_merged(struct daemon_state *ds, const struct squashd_config *cfg,
			      const struct lowers *l, const char *target, uid_t uid, struct mount_entry **out,
			      char *err, size_t errlen, long long deadline_ms)
{
	enum result res = RESULT_OK;
	char why[1024] = "";

	pthread_mutex_lock(&ds->lock);
	int shared = sharing_take_locked(ds, cfg, find_merged, l, target, out, &res, err, errlen,
					 deadline_ms);
	/* Before the entry exists: a refusal for this user's share is no
	 * outcome for the others who wait on the same merge. */
	if (shared == 0 && merged_mounts_user_refuses_locked(ds, cfg, uid, why, sizeof(why))) {
		pthread_mutex_unlock(&ds->lock);
		snprintf(err, errlen, "merging %zu images at %s: %s", l->n, target, why);
		return RESULT_USER_ERROR;
	}
	struct mount_entry *m = shared == 0 ? new_merged_locked(ds, l, uid) : NULL;
	pthread_mutex_unlock(&ds->lock);
	if (shared != 0)
		return shared > 0 ? RESULT_OK : res;
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}

	/* Unlocked: the lowers are referenced, their paths fixed. */
	struct merge_mount *mm = merge_mount_new(m, l);
	int done = 1;
	if (!mm) {
		snprintf(why, sizeof(why), "out of memory");
		res = RESULT_NODE_ERROR;
	} else if (mkdir(m->mount_point, 0755) < 0 && errno != EEXIST) {
		snprintf(why, sizeof(why), "cannot create mount point %s: %s", m->mount_point,
			 strerror(errno));
		res = RESULT_NODE_ERROR;
	} else if (!fuse_lower(l)) {
		/* Kernel mounts only: the overlay waits on nobody's server, and
		 * no user's budget may fail a merge other users share. */
		merge_mount_call(mm);
		res = mm->res;
		snprintf(why, sizeof(why), "%s", mm->why);
	} else if ((done = given_up_mounts_call(uid, merge_mount_call, merge_mount_late, merge_mount_free,
						mm, deadline_ms, &res, why, sizeof(why))) < 0) {
		done = 1;
	} else if (done) {
		res = mm->res;
		snprintf(why, sizeof(why), "%s", mm->why);
	} else {
		mm = NULL; /* the call's thread has it now */
		res = RESULT_NODE_ERROR;
	}
	merge_mount_free(mm);

	pthread_mutex_lock(&ds->lock);
	if (!done) {
		unsigned killed = kill_lower_servers_locked(l);

		snprintf(why, sizeof(why), "the overlay mount did not finish within the request's "
			 "deadline: a FUSE server of its images did not answer (stopped or hung); "
			 "squashd killed %u of them, and their mounts restart", killed);
	}
	if (res == RESULT_OK) {
		m->state = MOUNT_READY;
		log_info("merged %zu images at %s for %s", l->n, m->mount_point, target);
		*out = m;
	} else {
		snprintf(err, errlen, "merging %zu images at %s: %s", l->n, target, why);
		sharing_failed_locked(ds, cfg, m, res, err);
	}
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
	return res;
}

enum result merge_mount_groups(struct daemon_state *ds, const struct squashd_config *cfg,
			       struct job_entry *e, char *err, size_t errlen, long long deadline_ms)
{
	struct lowers l = { .m = malloc((e->count ? e->count : 1) * sizeof(*l.m)) };
	size_t *members = malloc((e->count ? e->count : 1) * sizeof(*members));
	enum result res = RESULT_OK;

	if (!l.m || !members) {
		snprintf(err, errlen, "out of memory");
		res = RESULT_NODE_ERROR;
	}
	for (size_t i = 0; res == RESULT_OK && i < e->count; i++) {
		/* Each group once, at its first image; alone is no group. */
		bool first = true;
		for (size_t j = 0; j < i && first; j++)
			first = strcmp(e->images[j].target, e->images[i].target) != 0;
		size_t count = first ? group_of(e, e->images[i].target, &l, members) : 0;
		if (count < 2 || l.n < 2)
			continue;
		for (size_t k = 0; k < count && res == RESULT_OK; k++) {
			if (!e->images[members[k]].writable)
				continue;
			snprintf(err, errlen, "image %s: :rw is not supported on images merged at one "
				 "target", e->images[members[k]].image);
			res = RESULT_USER_ERROR;
		}
		struct mount_entry *m = NULL;
		if (res != RESULT_OK)
			break;
		res = get_merged(ds, cfg, &l, e->images[i].target, e->uid, &m, err, errlen, deadline_ms);
		if (res != RESULT_OK)
			break;
		pthread_mutex_lock(&ds->lock);
		m->refcount += (unsigned)count - 1; /* one per image of the group */
		for (size_t k = 0; k < count; k++)
			e->images[members[k]].merged = m;
		pthread_mutex_unlock(&ds->lock);
	}
	free(l.m);
	free(members);
	return res;
}

void merge_relink_locked(struct daemon_state *ds)
{
	struct job_entry *lists[] = { ds->registry.jobs, ds->registry.scoped };

	for (size_t list = 0; list < 2; list++) {
		for (struct job_entry *e = lists[list]; e; e = e->next) {
			struct lowers l = { .m = malloc((e->count ? e->count : 1) * sizeof(*l.m)) };
			size_t *members = malloc((e->count ? e->count : 1) * sizeof(*members));
			for (size_t i = 0; l.m && members && i < e->count; i++) {
				if (e->images[i].merged || !e->images[i].mount)
					continue;
				size_t count = group_of(e, e->images[i].target, &l, members);
				if (count < 2 || l.n < 2)
					continue;
				struct mount_entry *m = registry_find_merged(&ds->registry, l.m, l.n);
				for (size_t k = 0; m && k < count; k++)
					e->images[members[k]].merged = m;
				if (!m && e->kind == HOLDER_JOB && e->status == SQUASH__STATUS__OK)
					registry_job_set_failure(e, SQUASH__STATUS__NODE_ERROR,
								 "the merged mount of this job's images at one "
								 "target vanished while squashd was restarting");
			}
			free(l.m);
			free(members);
		}
	}
}

const struct mount_entry *merge_source(const struct job_entry *e, size_t i)
{
	return e->images[i].merged ? e->images[i].merged : e->images[i].mount;
}

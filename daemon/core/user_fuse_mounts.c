#include "config.h"
#include "core/user_fuse_mounts.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"

/* A FUSE mount of uid's in the node's table: every state but failed
 * (a dead server's mount stays until its holders let go). */
static bool in_table(const struct mount_entry *m, uid_t uid)
{
	return m->key.mode == SQUASH__MOUNT_MODE__FUSE && m->key.owner_uid == uid &&
	       m->state != MOUNT_FAILED;
}

unsigned user_fuse_mounts_limit(const struct squashd_config *cfg)
{
	if (cfg->max_fuse_mounts_per_user)
		return cfg->max_fuse_mounts_per_user;
	if (cfg->fusermount_mount_max < 0)
		return 0;
	unsigned share = (unsigned)cfg->fusermount_mount_max / USER_FUSE_MOUNTS_DIVISOR;
	return share ? share : 1;
}

unsigned user_fuse_mounts_locked(struct daemon_state *ds, uid_t uid)
{
	unsigned n = 0;

	for (const struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		n += in_table(m, uid);
	/* A session binds each image's own mount, or its merge's overlay
	 * (not FUSE); an image recorded before its merge is counted once
	 * more until then, which errs on the refusing side. */
	for (const struct job_entry *e = ds->registry.scoped; e; e = e->next)
		if (e->kind == HOLDER_SESSION && e->uid == uid)
			for (size_t i = 0; i < e->count; i++)
				n += !e->images[i].merged && e->images[i].mount &&
				     e->images[i].mount->key.mode == SQUASH__MOUNT_MODE__FUSE;
	return n;
}

bool user_fuse_mounts_refuses_locked(struct daemon_state *ds, const struct squashd_config *cfg,
				     uid_t uid, char *why, size_t whylen)
{
	unsigned limit = user_fuse_mounts_limit(cfg), held;

	if (uid == 0 || limit == 0 || (held = user_fuse_mounts_locked(ds, uid)) < limit)
		return false;
	snprintf(why, whylen, "the images of uid %u already put %u FUSE file systems in this node's mount "
		 "table (mounts, and binds of them by squash-shell sessions), that user's share "
		 "(max_fuse_mounts_per_user = %u, of fusermount's mount_max = %d for all users' own FUSE "
		 "mounts): end some of that user's jobs or sessions first, or merge images at one target "
		 "(one mount)", (unsigned)uid, held, limit, cfg->fusermount_mount_max);
	return true;
}

bool fuse_table_nearly_full(const struct squashd_config *cfg, char *problem, size_t len)
{
	char *line = NULL;
	size_t cap = 0;
	unsigned long entries = 0;
	struct squash_mount m;
	FILE *f;

	if (cfg->fusermount_mount_max < 0 || !(f = fopen("/proc/self/mountinfo", "re")))
		return false;
	while (getline(&line, &cap, f) > 0)
		entries += squash_mountinfo_parse(line, &m) == 0 &&
			   (!strcmp(m.fstype, "fuse") || !strncmp(m.fstype, "fuse.", 5));
	free(line);
	fclose(f);
	if (entries * 10 < (unsigned long)cfg->fusermount_mount_max * 9)
		return false;
	snprintf(problem, len, "this node's mount table lists %lu FUSE file systems, against fusermount's "
		 "mount_max = %d (/etc/fuse.conf): users' own FUSE mounts (squashfuse, sshfs, "
		 "Apptainer, enroot) are refused at mount_max; squashctl status shows each user's "
		 "\"FUSE mounts\" (max_fuse_mounts_per_user)", entries, cfg->fusermount_mount_max);
	return true;
}

/* A FUSE mount of a user's (any state but failed; not root's). */
static bool users_fuse(const struct mount_entry *m)
{
	return m->key.owner_uid != 0 && m->key.owner_uid != MOUNT_OWNER_ANY && in_table(m, m->key.owner_uid);
}

void user_fuse_mounts_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
				  user_budget_emit emit, void *arg)
{
	unsigned limit = user_fuse_mounts_limit(cfg);
	uid_t *uids;

	pthread_mutex_lock(&ds->lock);
	/* A session binds only mounts of its own user's: the owners are all. */
	size_t n = registry_mount_owners(&ds->registry, users_fuse, &uids);
	for (size_t i = 0; i < n; i++)
		emit(arg, uids[i], "FUSE mounts", user_fuse_mounts_locked(ds, uids[i]), limit);
	pthread_mutex_unlock(&ds->lock);
	free(uids);
}

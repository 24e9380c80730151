#include "config.h"
#include "core/union_mount.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/sharing.h"
#include "core/user_fuse_mounts.h"
#include "mount/fuse_keep.h"
#include "mount/mount_fuse.h"
#include "util/close_detached.h"
#include "util/log.h"

bool union_mount_wanted(const struct daemon_state *ds, const struct squashd_config *cfg,
			const struct identity *id)
{
	/* squashfuse_ll serves one image a process; root's jobs get no FUSE. */
	return cfg->fuse_union && !cfg->use_squashfuse_ll && ds->fuse_reader_pools &&
	       ds->fuse_reader_unions && id->uid != 0;
}

size_t union_mount_layers(const struct mount_key *keys, size_t n, size_t *layers)
{
	size_t count = 0;

	for (size_t i = 0; i < n; i++) {
		bool later = false;

		for (size_t j = i + 1; j < n && !later; j++)
			later = mount_key_equal(&keys[i], &keys[j]);
		if (!later)
			layers[count++] = i;
	}
	return count;
}

struct union_what {
	uid_t owner;
	const struct mount_key *keys;
	size_t n;
};

static struct mount_entry *find_union(struct registry *r, const void *what)
{
	const struct union_what *w = what;

	return registry_find_union(r, w->owner, w->keys, w->n);
}

/* The images' descriptors may lie on a FUSE mount whose server hangs:
 * closing one sends FLUSH, which must not hold the request. */
static void close_all(uid_t owner, int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close_detached(owner, fds[i]);
}

enum result union_mount_get(struct daemon_state *ds, const struct squashd_config *cfg,
			    const struct identity *id, int *fds, const struct mount_key *keys,
			    size_t n, const char *top, const char *target, struct mount_entry **out,
			    char *err, size_t errlen, long long deadline_ms)
{
	struct union_what w = { .owner = id->uid, .keys = keys, .n = n };
	struct mount_key key = { .mode = SQUASH__MOUNT_MODE__FUSE, .owner_uid = id->uid };
	char label[SQUASH_PATH_MAX + 64], why[1024] = "";
	enum result res = RESULT_OK;
	struct mount_entry *m = NULL;

	snprintf(label, sizeof(label), "%s (+%zu in a union)", top, n - 1);
	pthread_mutex_lock(&ds->lock);
	/* Waiters name the target, as for an overlay merge (core/merge.c). */
	int shared = sharing_take_locked(ds, cfg, find_union, &w, target, out, &res, err, errlen,
					 deadline_ms);
	/* Before the entry exists, as for one image (core/sharing.c). */
	bool over = shared == 0 && user_fuse_mounts_refuses_locked(ds, cfg, id->uid, why, sizeof(why));
	if (shared == 0 && !over) {
		m = registry_new_mount(&ds->registry, &key, label, ds->mount_dir);
		if (m && registry_set_parts(m, keys, n) < 0) {
			registry_remove_mount(&ds->registry, m);
			m = NULL;
		}
		if (m)
			m->refcount = 1;
	}
	pthread_mutex_unlock(&ds->lock);
	if (shared != 0 || !m) {
		close_all(id->uid, fds, n);
		if (over) {
			snprintf(err, errlen, "merging %zu images at %s: %s", n, target, why);
			return RESULT_USER_ERROR;
		}
		if (shared == 0)
			snprintf(err, errlen, "out of memory");
		return shared > 0 ? RESULT_OK : shared < 0 ? res : RESULT_NODE_ERROR;
	}

	/* Unlocked: nobody else touches a MOUNTING entry. */
	pid_t server = 0;
	int server_pidfd = -1, conn_fd = -1;
	if (mkdir(m->mount_point, 0755) < 0 && errno != EEXIST) {
		snprintf(why, sizeof(why), "cannot create mount point %s: %s", m->mount_point,
			 strerror(errno));
		res = RESULT_NODE_ERROR;
	} else {
		res = fuse_mount_union_kept(fds, n, m->mount_point, id, config_fuse_server(cfg),
					    daemon_time_left(deadline_ms), &server, &server_pidfd,
					    ds->fuse_reader_resumes && fuse_kernel_resends() ? &conn_fd : NULL,
					    why, sizeof(why));
	}
	struct fuse_keep *keep = res == RESULT_OK && conn_fd >= 0 ? fuse_keep_new(conn_fd, fds, n, id)
								  : NULL;
	close_all(id->uid, fds, n);

	pthread_mutex_lock(&ds->lock);
	if (res == RESULT_OK) {
		sharing_ready_locked(ds, m, server, server_pidfd, keep);
		log_info("merged %zu images at %s for %s as one FUSE union (uid %u)", n, m->mount_point,
			 target, (unsigned)id->uid);
		*out = m;
	} else {
		snprintf(err, errlen, "merging %zu images at %s: %s", n, target, why);
		sharing_failed_locked(ds, cfg, m, res, err);
	}
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
	return res;
}

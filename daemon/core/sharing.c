#include "config.h"
#include "core/sharing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "core/fuse_servers.h"
#include "core/kernel_prefetches.h"
#include "core/loop_devices.h"
#include "core/pinned_loops.h"
#include "core/policy.h"
#include "core/user_fuse_mounts.h"
#include "mount/fuse_keep.h"
#include "mount/image_open.h"
#include "mount/mount_fuse.h"
#include "mount/mount_loop.h"
#include "mount/reader_pool.h"
#include "mount/unmount.h"
#include "registry/linger.h"
#include "registry/usage.h"
#include "superblock.h"
#include "util/close_detached.h"
#include "util/log.h"

/* A merged mount's references to its lowers, once it is gone (lock held). */
static void put_lowers_locked(struct daemon_state *ds, struct mount_entry *m, struct teardown *td)
{
	for (size_t i = 0; i < m->n_lowers; i++)
		sharing_put_locked(ds, m->lowers[i], td);
	m->n_lowers = 0;
}

/* Whether m, whose last holder went, may linger (lock held): not while
 * squashd stops, never a merged mount, and a user's own image only within
 * that user's registry budgets (registry/usage.h; asked only when
 * lingering is on: the walk is the user's entries). */
static bool linger_may_begin_locked(struct daemon_state *ds, const struct mount_entry *m,
				    const struct squashd_config *cfg)
{
	if (ds->stopping || !cfg->linger_s)
		return false;
	/* A merge is nobody's once released (owner MOUNT_OWNER_ANY), so no
	 * budget would hold its lingering: one user ending session after
	 * session of 256 distinct merges would fill the node's mount table.
	 * Its lowers linger on their own, and merging them again is one
	 * overlay mount. */
	if (m->key.mode == MOUNT_MODE_MERGED)
		return false;
	if (registry_user_may_linger(&ds->registry, m, cfg->registry_entries_per_user,
				     cfg->registry_bytes_per_user))
		return true;
	log_info("image %s of uid %u is unmounted now, not kept for linger: that user's entries and "
		 "lingering mounts would pass registry_entries_per_user or registry_bytes_per_user",
		 m->image, (unsigned)m->key.owner_uid);
	return false;
}

void sharing_put_locked(struct daemon_state *ds, struct mount_entry *m, struct teardown *td)
{
	if (!m || m->refcount == 0 || --m->refcount > 0)
		return;
	switch (m->state) {
	case MOUNT_READY:
		if (linger_may_begin_locked(ds, m, td->cfg) && linger_begin(m, td->cfg->linger_s, squash_now_ms())) {
			/* The expiry thread may sleep past the new deadline otherwise. */
			pthread_cond_broadcast(&ds->changed);
			break;
		}
		m->state = MOUNT_UNMOUNTING;
		m->teardown_next = td->head;
		td->head = m;
		break;
	case MOUNT_FAILED:
	case MOUNT_DEAD:
		rmdir(m->mount_point);
		put_lowers_locked(ds, m, td);
		registry_remove_mount(&ds->registry, m);
		break;
	case MOUNT_MOUNTING:    /* its mounter holds a reference */
	case MOUNT_UNMOUNTING:  /* cannot be referenced */
	case MOUNT_LINGERING:   /* holds no references */
		break;
	}
}

/* Unmounts the chain from m on (lock not held; nobody else touches an
 * UNMOUNTING entry). */
static void unmount_chain(struct mount_entry *m, int timeout_ms)
{
	char err[PATH_MAX + 256];

	for (; m; m = m->teardown_next) {
		/* A user's reader serving other mounts of theirs stays. */
		pid_t server = m->server_pid > 0 && reader_pool_put(m->server_pid, m->key.owner_uid) ? m->server_pid : 0;

		if (m->key.mode == SQUASH__MOUNT_MODE__KERNEL)
			kernel_prefetches_stop(m->mount_point);
		if (unmount_image(m->mount_point, server, m->server_pidfd, m->key.owner_uid,
				  m->keep ? m->keep->conn_fd : -1, timeout_ms, err, sizeof(err)) != RESULT_OK)
			log_error("unmounting %s (image %s): %s", m->mount_point, m->image, err);
		else
			log_info("unmounted image %s from %s", m->image, m->mount_point);
		/* Gone from squashd's registry next, maybe not from the kernel. */
		pinned_loops_note(m);
	}
}

/* Drops the chain's entries from the registry (lock held), their lowers
 * into lowers. */
static void forget_chain_locked(struct daemon_state *ds, struct mount_entry *m,
				struct teardown *lowers)
{
	for (struct mount_entry *next; m; m = next) {
		next = m->teardown_next;
		put_lowers_locked(ds, m, lowers);
		registry_remove_mount(&ds->registry, m);
	}
}

void sharing_teardown(struct daemon_state *ds, struct teardown *td)
{
	int timeout_ms = (int)td->cfg->request_timeout_s * 1000;
	struct mount_entry *quick = NULL, **qt = &quick, *fuse = NULL, **ft = &fuse;

	/* Overlays and sessions' binds first: what they hold is among td's
	 * mounts. */
	teardown_dirs_run(td, timeout_ms);
	if (!td->head)
		return;
	/* Kernel and merged mounts before FUSE ones: they wait on nobody,
	 * while a FUSE mount's unmount may wait up to request_timeout for its
	 * user's reader to exit. Until they leave the registry their loop
	 * devices count for the node (and no longer for the user who let them
	 * go), so they leave it before that wait. */
	for (struct mount_entry *m = td->head, *next; m; m = next) {
		next = m->teardown_next;
		m->teardown_next = NULL;
		if (m->key.mode == SQUASH__MOUNT_MODE__FUSE) {
			*ft = m;
			ft = &m->teardown_next;
		} else {
			*qt = m;
			qt = &m->teardown_next;
		}
	}
	td->head = NULL;
	/* A merged mount's lowers go after it: they are its layers. */
	struct teardown lowers = TEARDOWN_INIT(td->cfg);
	lowers.log_peer = td->log_peer;
	unmount_chain(quick, timeout_ms);
	if (quick && fuse) {
		pthread_mutex_lock(&ds->lock);
		forget_chain_locked(ds, quick, &lowers);
		pthread_mutex_unlock(&ds->lock);
		quick = NULL;
	}
	unmount_chain(fuse, timeout_ms);
	/* One save for the whole teardown (the state file never lists
	 * UNMOUNTING entries, so nothing is lost meanwhile). */
	pthread_mutex_lock(&ds->lock);
	forget_chain_locked(ds, quick, &lowers);
	forget_chain_locked(ds, fuse, &lowers);
	daemon_save_locked(ds);
	pthread_mutex_unlock(&ds->lock);
	if (lowers.head && td->lowers_to)
		td->lowers_to(ds, &lowers);
	else if (lowers.head)
		sharing_teardown(ds, &lowers);
}

/* Makes the mount for m (state MOUNTING, held by the caller), unlocked. */
static enum result make_mount(struct daemon_state *ds, const struct squashd_config *cfg,
			      struct mount_entry *m, int fd, const struct identity *id,
			      long long deadline_ms, pid_t *server, int *server_pidfd, int *conn_fd,
			      char *loop_dev, size_t loop_len, char *why, size_t whylen)
{
	if (mkdir(m->mount_point, 0755) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create mount point %s: %s", m->mount_point, strerror(errno));
		return RESULT_NODE_ERROR;
	}
	/* Only squash-reader can take a connection over, and only a kernel
	 * that resends makes that worth it. */
	if (m->key.mode == SQUASH__MOUNT_MODE__FUSE)
		return fuse_mount_image_kept(fd, m->mount_point, id, config_fuse_server(cfg),
					     ds->fuse_reader_pools, daemon_time_left(deadline_ms),
					     server, server_pidfd,
					     ds->fuse_reader_resumes && fuse_kernel_resends() ? conn_fd : NULL,
					     why, whylen);
	struct teardown ended = TEARDOWN_INIT(cfg);
	bool refused = loop_devices_refuse(ds, cfg, m, &ended, why, whylen);

	/* Here: a kernel mount's unmount waits on no user's process. */
	sharing_teardown(ds, &ended);
	if (refused)
		return RESULT_NODE_ERROR;
	enum result res = loop_mount_image(fd, m->mount_point, loop_dev, loop_len, why, whylen);

	if (res == RESULT_OK)
		kernel_prefetches_start(cfg->squash_reader, fd, m->mount_point, id->uid);
	return res;
}

enum result sharing_open(const struct squashd_config *cfg, const struct identity *id,
			      const Squash__ImageSpec *spec, int *fd_out, struct mount_key *key,
			      char *err, size_t errlen, long long deadline_ms)
{
	int fd;
	struct stat st;
	struct image_header header;
	char why[SQUASH_PATH_MAX + 512];
	enum result res = image_open_as_user(spec->image, id, daemon_time_left(deadline_ms), &fd, &st,
					     &header, why, sizeof(why));
	if (res != RESULT_OK) {
		snprintf(err, errlen, "%s", why);
		return res;
	}
	int kernel_fd;
	Squash__MountMode mode = policy_mount_mode(cfg, fd, &kernel_fd, why, sizeof(why));
	log_context_image(spec->image, mode == SQUASH__MOUNT_MODE__KERNEL ? "kernel" : "fuse");
	if (why[0])
		log_warning("image %s goes to FUSE, not the kernel: %s", spec->image, why);
	if (mode == SQUASH__MOUNT_MODE__KERNEL) {
		/* From here on only root's own descriptor: the loop device
		 * reads the file squashd itself reached. */
		close_detached(id->uid, fd);
		fd = kernel_fd;
		if (fstat(fd, &st) < 0) {
			snprintf(err, errlen, "image %s: fstat: %s", spec->image, strerror(errno));
			close_detached(id->uid, fd);
			return RESULT_NODE_ERROR;
		}
	}
	if (mode == SQUASH__MOUNT_MODE__FUSE && id->uid == 0) {
		/* FUSE servers parse untrusted images; they never run as root. */
		snprintf(err, errlen, "image %s: jobs of root may only use trusted images "
			 "(its FUSE server would run as root)", spec->image);
		close_detached(id->uid, fd);
		return RESULT_USER_ERROR;
	}
	enum squash_reader reader = mode == SQUASH__MOUNT_MODE__KERNEL ? SQUASH_READER_KERNEL
									: SQUASH_READER_FUSE;
	if (header.read_errno) {
		snprintf(err, errlen, "image %s: cannot read image: %s", spec->image, strerror(header.read_errno));
		close_detached(id->uid, fd);
		return RESULT_NODE_ERROR;
	}
	if (squash_superblock_check(header.bytes, header.len, (uint64_t)st.st_size, reader, NULL,
				    why, sizeof(why)) < 0) {
		snprintf(err, errlen, "image %s: %s", spec->image, why);
		close_detached(id->uid, fd);
		return RESULT_USER_ERROR;
	}
	*key = (struct mount_key){
		.dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
		.mtime_sec = st.st_mtim.tv_sec, .mtime_nsec = st.st_mtim.tv_nsec,
		.mode = mode,
		.owner_uid = mode == SQUASH__MOUNT_MODE__FUSE ? id->uid : MOUNT_OWNER_ANY,
	};
	*fd_out = fd;
	return RESULT_OK;
}

static struct mount_entry *find_by_key(struct registry *r, const void *key)
{
	return registry_find_mount(r, key);
}

int sharing_take_locked(struct daemon_state *ds, const struct squashd_config *cfg,
			struct mount_entry *(*find)(struct registry *, const void *),
			const void *what, const char *image, struct mount_entry **out,
			enum result *res, char *err, size_t errlen, long long deadline_ms)
{
	struct mount_entry *m;

	while ((m = find(&ds->registry, what))) {
		m->refcount++;
		if (m->state == MOUNT_LINGERING)
			linger_take_over(m, squash_now_ms());
		while (m->state == MOUNT_MOUNTING && daemon_wait_locked(ds, deadline_ms))
			;
		if (m->state == MOUNT_READY) {
			*out = m;
			return 1;
		}
		if (m->state == MOUNT_MOUNTING) { /* gave up waiting */
			m->refcount--; /* the mounter still holds it */
			snprintf(err, errlen, ds->stopping ? "image %s: squashd is stopping"
				 : "image %s: another job's request is still mounting it (timed out waiting)",
				 image);
			*res = RESULT_NODE_ERROR;
			return -1;
		}
		struct teardown td = TEARDOWN_INIT(cfg);
		if (m->state == MOUNT_FAILED) {
			/* The same file, mode and user: the same outcome. */
			snprintf(err, errlen, "%s", m->failure ? m->failure : "mount failed");
			*res = (enum result)m->failure_result;
			sharing_put_locked(ds, m, &td);
			return -1;
		}
		/* Died right after it was made: let go and mount afresh. */
		sharing_put_locked(ds, m, &td);
		if (td.head) {
			pthread_mutex_unlock(&ds->lock);
			sharing_teardown(ds, &td);
			pthread_mutex_lock(&ds->lock);
		}
	}
	return 0;
}

enum result sharing_get(struct daemon_state *ds, const struct squashd_config *cfg,
			const struct identity *id, const Squash__ImageSpec *spec,
			struct mount_entry **out, char *err, size_t errlen, long long deadline_ms)
{
	struct mount_key key;
	int fd;
	enum result res = sharing_open(cfg, id, spec, &fd, &key, err, errlen, deadline_ms);

	if (res != RESULT_OK)
		return res;
	return sharing_get_opened(ds, cfg, id, spec, fd, &key, out, err, errlen, deadline_ms);
}

enum result sharing_get_opened(struct daemon_state *ds, const struct squashd_config *cfg,
			       const struct identity *id, const Squash__ImageSpec *spec, int fd,
			       const struct mount_key *keyp, struct mount_entry **out, char *err,
			       size_t errlen, long long deadline_ms)
{
	const struct mount_key key = *keyp;
	char why[SQUASH_PATH_MAX + 512];
	enum result res = RESULT_OK;

	pthread_mutex_lock(&ds->lock);
	int shared = sharing_take_locked(ds, cfg, find_by_key, &key, spec->image, out, &res, err, errlen,
					 deadline_ms);
	if (shared != 0) {
		pthread_mutex_unlock(&ds->lock);
		close_detached(id->uid, fd);
		return shared > 0 ? RESULT_OK : res;
	}
	/* Before the entry exists: a refusal for this user's share is no
	 * outcome for the others who wait on the same image. */
	if (key.mode == SQUASH__MOUNT_MODE__KERNEL &&
	    loop_devices_user_refuses_locked(ds, cfg, id->uid, why, sizeof(why))) {
		pthread_mutex_unlock(&ds->lock);
		close_detached(id->uid, fd);
		snprintf(err, errlen, "image %s: %s", spec->image, why);
		return RESULT_USER_ERROR;
	}
	if (key.mode == SQUASH__MOUNT_MODE__FUSE &&
	    user_fuse_mounts_refuses_locked(ds, cfg, id->uid, why, sizeof(why))) {
		pthread_mutex_unlock(&ds->lock);
		close_detached(id->uid, fd);
		snprintf(err, errlen, "image %s: %s", spec->image, why);
		return RESULT_USER_ERROR;
	}
	struct mount_entry *m = registry_new_mount(&ds->registry, &key, spec->image, ds->mount_dir);
	if (!m) {
		pthread_mutex_unlock(&ds->lock);
		close_detached(id->uid, fd);
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	m->refcount = 1;
	m->mounting_for = id->uid;
	pthread_mutex_unlock(&ds->lock);

	pid_t server = 0;
	int server_pidfd = -1, conn_fd = -1;
	char loop_dev[32] = "";
	res = make_mount(ds, cfg, m, fd, id, deadline_ms, &server, &server_pidfd, &conn_fd, loop_dev,
			 sizeof(loop_dev), why, sizeof(why));
	struct fuse_keep *keep = res == RESULT_OK && conn_fd >= 0 ? fuse_keep_new(conn_fd, &fd, 1, id) : NULL;
	close_detached(id->uid, fd);

	pthread_mutex_lock(&ds->lock);
	if (res == RESULT_OK) {
		sharing_ready_locked(ds, m, server, server_pidfd, keep);
		snprintf(m->loop_device, sizeof(m->loop_device), "%s", loop_dev);
		log_info("mounted image %s at %s (%s%s%s, uid %u)", spec->image, m->mount_point,
			 key.mode == SQUASH__MOUNT_MODE__FUSE ? "fuse" : "kernel",
			 loop_dev[0] ? " on " : "", loop_dev, (unsigned)id->uid);
		*out = m;
	} else {
		snprintf(err, errlen, "image %s: %s", spec->image, why);
		sharing_failed_locked(ds, cfg, m, res, err);
	}
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
	return res;
}

void sharing_ready_locked(struct daemon_state *ds, struct mount_entry *m, pid_t server,
			  int server_pidfd, struct fuse_keep *keep)
{
	m->state = MOUNT_READY;
	m->server_pid = server;
	m->server_pidfd = server_pidfd;
	m->keep = keep;
	if (server > 0)
		fuse_servers_watch_locked(ds, m);
}

void sharing_failed_locked(struct daemon_state *ds, const struct squashd_config *cfg,
			   struct mount_entry *m, enum result res, const char *err)
{
	struct teardown none = TEARDOWN_INIT(cfg);

	rmdir(m->mount_point);
	m->state = MOUNT_FAILED;
	m->failure = strdup(err);
	m->failure_result = res;
	sharing_put_locked(ds, m, &none);
}

const struct mount_entry *sharing_next_mount_locked(const struct daemon_state *ds,
						    const struct mount_entry *prev)
{
	return prev ? prev->next : ds->registry.mounts;
}

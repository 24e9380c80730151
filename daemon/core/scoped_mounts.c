#include "config.h"
#include "core/scoped_mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mount/child_process.h"
#include "mount/identity.h"
#include "util/log.h"
#include "core/policy.h"
#include "mount/process_watch.h"
#include "target.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Sessions a user may hold at once on a node: each pins mounts and a
 * watcher slot while its process lives. */
#define MAX_SESSIONS_PER_USER 32

static Squash__Status status_of(enum result r)
{
	return r == RESULT_USER_ERROR ? SQUASH__STATUS__USER_ERROR : SQUASH__STATUS__NODE_ERROR;
}

/* A session's directory: sessions_dir/PID. */
static int session_dir(const struct daemon_state *ds, pid_t pid, char *buf, size_t len)
{
	return snprintf(buf, len, "%s/%d", ds->sessions_dir, (int)pid) < (int)len ? 0 : -1;
}

/* Undoes a session's binds and its directory. Detaching never blocks, so
 * this may run with the lock held. Only the names squashd made are
 * touched, never followed: the user owns the directory. */
static void session_binds_remove(const struct daemon_state *ds, pid_t pid)
{
	char dir[PATH_MAX], p[PATH_MAX + 16];

	if (session_dir(ds, pid, dir, sizeof(dir)) < 0)
		return;
	for (int i = 0; i < SQUASH_MAX_IMAGES; i++) {
		snprintf(p, sizeof(p), "%s/%d", dir, i);
		if (umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
			log_warning("detaching session bind %s: %s", p, strerror(errno));
		rmdir(p);
	}
	if (rmdir(dir) < 0 && errno != ENOENT)
		log_warning("cannot remove session directory %s: %s", dir, strerror(errno));
}

/* Lets uid (and nobody else but root) enter and list the directory fd:
 * root:root 0700 plus the POSIX ACL entry user:UID:r-x, written as the
 * kernel's xattr (version 2; entries sorted by tag). The user gets no
 * write access: /run must not become a place users can fill. */
static int grant_user(int fd, uid_t uid)
{
	struct { uint16_t tag, perm; uint32_t id; } __attribute__((packed)) entries[] = {
		{ 0x01, 7, 0xffffffffu },     /* ACL_USER_OBJ rwx */
		{ 0x02, 5, (uint32_t)uid },   /* ACL_USER uid r-x */
		{ 0x04, 0, 0xffffffffu },     /* ACL_GROUP_OBJ --- */
		{ 0x10, 5, 0xffffffffu },     /* ACL_MASK r-x */
		{ 0x20, 0, 0xffffffffu },     /* ACL_OTHER --- */
	};
	uint8_t blob[4 + sizeof(entries)];
	uint32_t version = 2;

	/* The xattr is little-endian; so is every machine this builds for. */
	_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "POSIX ACL xattr needs byte swapping");
	memcpy(blob, &version, 4);
	memcpy(blob + 4, entries, sizeof(entries));
	return fsetxattr(fd, "system.posix_acl_access", blob, sizeof(blob), 0);
}

/* Binds e's mounts at sessions_dir/PID/I (I in answer order) for the
 * session's user (lock not held; e is complete and held). The directory is
 * root's and stays so (nothing in it can be swapped or added); an ACL lets
 * the session's user alone enter it, so no other user reaches a FUSE mount
 * that allows others. Returns 0, or -1 with err. */
static int session_binds_make(const struct daemon_state *ds, const struct job_entry *e,
			      char *dir, size_t dirlen, char *err, size_t errlen)
{
	char p[PATH_MAX + 16];
	int fd;

	session_binds_remove(ds, e->session_pid); /* an earlier process with this pid */
	if (session_dir(ds, e->session_pid, dir, dirlen) < 0 || mkdir(dir, 0700) < 0) {
		snprintf(err, errlen, "cannot create the session directory %s: %s", dir, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < e->count; i++) {
		snprintf(p, sizeof(p), "%s/%zu", dir, i);
		if (mkdir(p, 0755) < 0 || mount(e->images[i].mount->mount_point, p, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, p, NULL, MS_PRIVATE, NULL) < 0 ||
		    mount(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0) {
			snprintf(err, errlen, "cannot bind image %s for the session at %s: %s",
				 e->images[i].image, p, strerror(errno));
			session_binds_remove(ds, e->session_pid);
			return -1;
		}
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || grant_user(fd, e->uid) < 0) {
		snprintf(err, errlen, "cannot let uid %u into the session directory %s: %s%s",
			 (unsigned)e->uid, dir, strerror(errno),
			 errno == EOPNOTSUPP ? " (squashd's state_dir needs POSIX ACL support)" : "");
		if (fd >= 0)
			close(fd);
		session_binds_remove(ds, e->session_pid);
		return -1;
	}
	close(fd);
	return 0;
}

/* Drops a scoped entry's references and the entry (lock held). */
static void drop_scoped(struct daemon_state *ds, struct job_entry *e, struct teardown *td)
{
	if (e->kind == HOLDER_SESSION && !e->pending)
		session_binds_remove(ds, e->session_pid);
	for (size_t i = 0; i < e->count; i++)
		job_mounts_put(ds, e->images[i].mount, td);
	registry_remove_scoped(&ds->registry, e);
}

/* Appends e's mounts to the answer (lock held). Returns -1 with the reply
 * set to an error when one of them is unusable. */
static int append_mounts(struct reply *out, const struct job_entry *e, bool step)
{
	size_t n = out->resp.n_job_mounts;
	Squash__JobMount **grown;

	for (size_t i = 0; i < e->count; i++) {
		const struct mount_entry *m = e->images[i].mount;
		if (!m) {
			reply_error(out, SQUASH__STATUS__NODE_ERROR,
				    "the mount of image %s was lost while squashd restarted", e->images[i].image);
			return -1;
		}
		if (m->state == MOUNT_DEAD) {
			reply_error(out, SQUASH__STATUS__NODE_ERROR,
				    "the FUSE server of image %s on this node %s; its mount is gone",
				    m->image, m->failure ? m->failure : "died");
			return -1;
		}
	}
	grown = realloc(out->resp.job_mounts, (n + e->count + 1) * sizeof(*grown));
	if (!grown) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return -1;
	}
	out->resp.job_mounts = grown;
	for (size_t i = 0; i < e->count; i++) {
		Squash__JobMount *jm = malloc(sizeof(*jm));
		if (!jm) {
			reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
			return -1;
		}
		squash__job_mount__init(jm);
		jm->image = e->images[i].image;
		jm->target = e->images[i].target;
		jm->source = e->images[i].mount->mount_point;
		jm->mode = e->images[i].mount->key.mode;
		jm->has_step = step;
		jm->step = step;
		out->resp.job_mounts[out->resp.n_job_mounts++] = jm;
	}
	return 0;
}

/* Mounts the images of e (pending, not locked), skipping those marked in
 * skip. On failure err holds the reason. */
static enum result mount_scoped(struct daemon_state *ds, struct job_entry *e, uid_t uid,
				Squash__ImageSpec *const *images, size_t n, const bool *skip,
				char *err, size_t errlen, long long deadline_ms)
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
		if (images[i]->has_writable && images[i]->writable) {
			snprintf(err, errlen, "image %s: :rw is only for a job's own images (sbatch, salloc, "
				 "or an srun that creates the job); a step's or squash-shell's images are "
				 "read-only", images[i]->image);
			res = RESULT_USER_ERROR;
			break;
		}
		res = job_mounts_add_image(ds, id, e, images[i], err, errlen, deadline_ms);
	}
	free(id);
	return res;
}

/* Refuses while the registry cannot be saved (lock held). */
static bool degraded(struct daemon_state *ds, struct reply *out)
{
	if (ds->stopping) {
		reply_error(out, SQUASH__STATUS__UNAVAILABLE, "squashd is stopping");
		return true;
	}
	if (ds->save_error[0] && job_mounts_save_locked(ds) < 0) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR,
			    "squashd on this node cannot save its registry (%s); it mounts nothing until it can",
			    ds->save_error);
		return true;
	}
	return false;
}

/* The end of a scoped mount request (lock held): keep and answer, or undo. */
static void finish(struct daemon_state *ds, struct job_entry *e, enum result res, char *err,
		   size_t errlen, struct reply *out, struct teardown *td, const char *who)
{
	e->pending = false;
	if (res == RESULT_OK && job_mounts_save_locked(ds) < 0) {
		snprintf(err, errlen, "squashd on this node cannot save its registry (%s); "
			 "the mounts were undone", ds->save_error);
		res = RESULT_NODE_ERROR;
	}
	if (res == RESULT_OK && append_mounts(out, e, e->kind == HOLDER_STEP) == 0) {
		log_info("%s: %zu image(s) ready for uid %u", who, e->count, (unsigned)e->uid);
	} else {
		if (res == RESULT_OK)
			snprintf(err, errlen, "%s", out->message);
		else if (res == RESULT_NODE_ERROR)
			log_error("%s (uid %u): %s", who, (unsigned)e->uid, err);
		else
			log_info("%s (uid %u) refused: %s", who, (unsigned)e->uid, err);
		reply_free(out);
		reply_error(out, res == RESULT_OK ? SQUASH__STATUS__NODE_ERROR : status_of(res), "%s", err);
		drop_scoped(ds, e, td);
		job_mounts_save_locked(ds);
	}
	pthread_cond_broadcast(&ds->changed);
}

static unsigned long long start_time_of(pid_t pid);
static int peer_pidfd(int fd, pid_t pid);
static int watch_holder(struct daemon_state *ds, const struct job_entry *e, int pidfd);

/* ---------------------------------------------------------------- steps */

void scoped_mount_step(struct daemon_state *ds, const struct peer *peer, int fd,
		       const Squash__MountJobRequest *req, struct reply *out, struct teardown *td,
		       long long deadline_ms)
{
	char err[SQUASH_PATH_MAX * 2 + 1024], who[64];
	bool skip[SQUASH_MAX_IMAGES] = { false };
	enum result res;
	size_t n_new = 0;

	snprintf(who, sizeof(who), "step %u.%u", req->job_id, req->step_id);
	res = policy_check_mount_request(ds->cfg, req, err, sizeof(err));
	if (res != RESULT_OK) {
		log_info("%s (uid %u) refused: %s", who, (unsigned)req->uid, err);
		reply_error(out, status_of(res), "%s", err);
		return;
	}
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = registry_find_step(&ds->registry, req->job_id, req->step_id);
	while (e && e->pending && job_mounts_wait(ds, deadline_ms))
		e = registry_find_step(&ds->registry, req->job_id, req->step_id);
	if (e && e->pending) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, ds->stopping ? SQUASH__STATUS__UNAVAILABLE : SQUASH__STATUS__NODE_ERROR,
			    "another mount request for step %u.%u is still at work", req->job_id, req->step_id);
		return;
	}
	if (e) /* a retry after a lost answer: start again */
		drop_scoped(ds, e, td);
	struct job_entry *job = registry_find_job(&ds->registry, req->job_id);
	while (job && job->pending && job_mounts_wait(ds, deadline_ms))
		job = registry_find_job(&ds->registry, req->job_id);
	if (degraded(ds, out)) {
		pthread_mutex_unlock(&ds->lock);
		return;
	}
	if (registry_find_step(&ds->registry, req->job_id, req->step_id)) {
		/* Another request for this step came in while we waited. */
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__UNAVAILABLE, "another mount request for step %u.%u "
			    "came first; ask again", req->job_id, req->step_id);
		return;
	}
	if (job && job->uid != req->uid) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__NODE_ERROR,
			    "job %u belongs to uid %u on this node, not to uid %u", req->job_id,
			    (unsigned)job->uid, (unsigned)req->uid);
		return;
	}
	/* The step sees the job's images too: no target may collide. */
	for (size_t i = 0; job && i < req->n_images; i++) {
		const Squash__ImageSpec *spec = req->images[i];
		for (size_t k = 0; k < job->count && !skip[i]; k++) {
			const struct job_image *ji = &job->images[k];
			if (!strcmp(ji->target, spec->target) && !strcmp(ji->image, spec->image)) {
				skip[i] = true; /* the job's mount already serves it */
			} else if (squash_targets_overlap(ji->target, spec->target)) {
				pthread_mutex_unlock(&ds->lock);
				log_info("%s (uid %u) refused: target %s clashes with job image %s at %s", who,
					 (unsigned)req->uid, spec->target, ji->image, ji->target);
				reply_error(out, SQUASH__STATUS__USER_ERROR,
					    "step image %s: its target %s %s the target %s of the job's image %s; "
					    "a step sees the job's images and its own, so give the step image "
					    "another target (IMAGE:TARGET)", spec->image, spec->target,
					    !strcmp(ji->target, spec->target) ? "is also" :
					    strlen(ji->target) < strlen(spec->target) ? "lies inside" : "contains",
					    ji->target, ji->image);
				return;
			}
		}
		n_new += !skip[i];
	}
	if ((job ? job->count : 0) + n_new > ds->cfg->max_images_per_job) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__USER_ERROR,
			    "too many images: the job's %zu and the step's %zu (this node allows at most %u "
			    "per job, its steps' own images included)", job ? job->count : 0, n_new,
			    ds->cfg->max_images_per_job);
		return;
	}
	e = registry_add_scoped(&ds->registry, HOLDER_STEP, req->job_id, req->step_id, req->uid);
	if (!e) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	e->pending = true;
	/* The asking slurmstepd: if it dies without its end of step (killed
	 * hard), its pidfd tells, and the step's images go with it. */
	e->session_pid = peer->pid;
	e->session_start = start_time_of(peer->pid);
	pthread_mutex_unlock(&ds->lock);

	res = mount_scoped(ds, e, req->uid, req->images, req->n_images, skip, err, sizeof(err),
			   deadline_ms);

	pthread_mutex_lock(&ds->lock);
	finish(ds, e, res, err, sizeof(err), out, td, who);
	bool kept = out->resp.status == SQUASH__STATUS__OK && e->session_start;
	struct job_entry copy = kept ? *e : (struct job_entry){ 0 };
	pthread_mutex_unlock(&ds->lock);
	int pidfd = kept ? peer_pidfd(fd, peer->pid) : -1;
	if (kept && (pidfd < 0 || watch_holder(ds, &copy, pidfd) < 0))
		log_warning("%s: cannot watch its slurmstepd (pid %d); gc releases the step if it dies",
			    who, (int)peer->pid);
}

void scoped_release_step(struct daemon_state *ds, uint32_t job_id, uint32_t step_id,
			 struct reply *out, struct teardown *td)
{
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = registry_find_step(&ds->registry, job_id, step_id);
	if (e && e->pending) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__UNAVAILABLE,
			    "the mount request of step %u.%u is still at work; ask again", job_id, step_id);
		return;
	}
	if (!e) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__OK, "step %u.%u has no mounts of its own on this node",
			    job_id, step_id);
		return;
	}
	drop_scoped(ds, e, td);
	log_info("step %u.%u released", job_id, step_id);
	job_mounts_save_locked(ds);
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
}

unsigned scoped_release_job_steps(struct daemon_state *ds, uint32_t job_id, struct teardown *td)
{
	unsigned n = 0;

	pthread_mutex_lock(&ds->lock);
	for (struct job_entry *e = ds->registry.scoped, *next; e; e = next) {
		next = e->next;
		if (e->kind != HOLDER_STEP || e->job_id != job_id || e->pending)
			continue;
		log_info("step %u.%u released with its job", e->job_id, e->step_id);
		drop_scoped(ds, e, td);
		n++;
	}
	if (n) {
		job_mounts_save_locked(ds);
		pthread_cond_broadcast(&ds->changed);
	}
	pthread_mutex_unlock(&ds->lock);
	return n;
}

bool scoped_release_step_gone(struct daemon_state *ds, uint32_t job_id, uint32_t step_id,
			      struct teardown *td)
{
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = registry_find_step(&ds->registry, job_id, step_id);
	bool found = e && !e->pending;
	if (found) {
		drop_scoped(ds, e, td);
		ds->gc_releases++;
		job_mounts_save_locked(ds);
		pthread_cond_broadcast(&ds->changed);
	}
	pthread_mutex_unlock(&ds->lock);
	return found;
}

void scoped_step_info(struct daemon_state *ds, const struct peer *peer,
		      const Squash__StepInfoRequest *req, struct reply *out, long long deadline_ms)
{
	job_mounts_step_info(ds, peer, req->job_id, out, deadline_ms);
	if (out->resp.status == SQUASH__STATUS__OK)
		out->resp.sessions_dir = ds->sessions_dir;
	if (!req->has_step_id)
		return;
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = registry_find_step(&ds->registry, req->job_id, req->step_id);
	while (e && e->pending && job_mounts_wait(ds, deadline_ms))
		e = registry_find_step(&ds->registry, req->job_id, req->step_id);
	if (e && (e->pending || (peer->uid != 0 && peer->uid != e->uid)))
		e = NULL;
	if (out->resp.status == SQUASH__STATUS__NOT_FOUND && e && req->job_without_images) {
		/* A job allocated without images: the step's are all there is. */
		reply_free(out);
		reply_init(out);
		out->resp.base_dir = (char *)ds->cfg->base_dir;
		out->resp.mount_dir = ds->mount_dir;
		out->resp.has_job_uid = true;
		out->resp.job_uid = e->uid;
		out->resp.sessions_dir = ds->sessions_dir;
	}
	if (out->resp.status == SQUASH__STATUS__OK && e)
		append_mounts(out, e, true);
	pthread_mutex_unlock(&ds->lock);
}

/* ---------------------------------------------------------------- sessions */

/* Start time of pid in clock ticks since boot (field 22 of /proc/PID/stat),
 * 0 when unknown: with the pid it names one process across restarts. */
static unsigned long long start_time_of(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: count from the last ')'. */
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p && sscanf(p + 1, "%llu", &start) != 1)
		start = 0;
	return start;
}

/* The process whose life bounds a scoped entry: a session's squash-shell,
 * a step's slurmstepd. */
struct holder_watch {
	struct daemon_state *ds;
	enum holder_kind kind;
	uint32_t job_id, step_id;
	pid_t pid;
	unsigned long long start;
};

static void holder_exited(void *arg, pid_t pid, int status)
{
	struct holder_watch *w = arg;
	struct daemon_state *ds = w->ds;
	struct teardown td = { NULL };

	(void)status;
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = w->kind == HOLDER_SESSION
		? registry_find_session(&ds->registry, pid)
		: registry_find_step(&ds->registry, w->job_id, w->step_id);
	/* The entry this process made, not a later one under the same key. */
	if (e && !e->pending && e->session_pid == pid && e->session_start == w->start) {
		if (e->kind == HOLDER_SESSION)
			log_info("session of pid %d (uid %u) ended; releasing its %zu image(s)", (int)pid,
				 (unsigned)e->uid, e->count);
		else
			log_info("step %u.%u: its slurmstepd (pid %d) is gone without releasing; releasing",
				 e->job_id, e->step_id, (int)pid);
		drop_scoped(ds, e, &td);
		job_mounts_save_locked(ds);
		pthread_cond_broadcast(&ds->changed);
	}
	pthread_mutex_unlock(&ds->lock);
	free(w);
	job_mounts_teardown(ds, &td);
}

/* Watches e's process (takes pidfd): when it exits, e is released. */
static int watch_holder(struct daemon_state *ds, const struct job_entry *e, int pidfd)
{
	struct holder_watch *w = malloc(sizeof(*w));

	if (w) {
		*w = (struct holder_watch){ ds, e->kind, e->job_id, e->step_id, e->session_pid,
					    e->session_start };
		if (process_watch_add(pidfd, e->session_pid, holder_exited, w) == 0)
			return 0;
	}
	free(w);
	close(pidfd);
	return -1;
}

static int peer_pidfd(int fd, pid_t pid)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0)
		return pidfd;
	return child_pidfd(pid); /* kernels before 6.5 */
}

void scoped_mount_session(struct daemon_state *ds, const struct peer *peer, int fd,
			  const Squash__SessionMountRequest *req, struct reply *out,
			  struct teardown *td, long long deadline_ms)
{
	Squash__MountJobRequest as_job = SQUASH__MOUNT_JOB_REQUEST__INIT;
	char err[SQUASH_PATH_MAX * 2 + 1024], who[64];
	enum result res;
	unsigned mine = 0;
	int pidfd;

	snprintf(who, sizeof(who), "session of pid %d", (int)peer->pid);
	errno = 0;
	as_job.uid = peer->uid;
	as_job.n_images = req->n_images;
	as_job.images = req->images;
	res = policy_check_mount_request(ds->cfg, &as_job, err, sizeof(err));
	if (res != RESULT_OK) {
		log_info("%s (uid %u) refused: %s", who, (unsigned)peer->uid, err);
		reply_error(out, status_of(res), "%s", err);
		return;
	}
	pidfd = peer_pidfd(fd, peer->pid);
	unsigned long long start = start_time_of(peer->pid);
	if (pidfd < 0 || peer->pid <= 0 || start == 0) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR,
			    "cannot watch the requesting process (pid %d): %s", (int)peer->pid,
			    strerror(errno ? errno : ESRCH));
		if (pidfd >= 0)
			close(pidfd);
		return;
	}
	pthread_mutex_lock(&ds->lock);
	for (const struct job_entry *s = ds->registry.scoped; s; s = s->next)
		mine += s->kind == HOLDER_SESSION && s->uid == peer->uid;
	if (degraded(ds, out)) {
		pthread_mutex_unlock(&ds->lock);
		close(pidfd);
		return;
	}
	if (registry_find_session(&ds->registry, peer->pid) || (peer->uid != 0 && mine >= MAX_SESSIONS_PER_USER)) {
		pthread_mutex_unlock(&ds->lock);
		close(pidfd);
		reply_error(out, SQUASH__STATUS__USER_ERROR,
			    mine >= MAX_SESSIONS_PER_USER ? "too many squash-shell sessions of this user on this node (at most %d)"
			    : "this process already holds a session (pid %d)",
			    mine >= MAX_SESSIONS_PER_USER ? MAX_SESSIONS_PER_USER : (int)peer->pid);
		return;
	}
	struct job_entry *e = registry_add_scoped(&ds->registry, HOLDER_SESSION, 0, 0, peer->uid);
	if (!e) {
		pthread_mutex_unlock(&ds->lock);
		close(pidfd);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	e->pending = true;
	e->session_pid = peer->pid;
	e->session_start = start;
	pthread_mutex_unlock(&ds->lock);

	res = mount_scoped(ds, e, peer->uid, req->images, req->n_images, NULL, err, sizeof(err),
			   deadline_ms);

	pthread_mutex_lock(&ds->lock);
	finish(ds, e, res, err, sizeof(err), out, td, who);
	bool kept = out->resp.status == SQUASH__STATUS__OK;
	struct job_entry copy = kept ? *e : (struct job_entry){ 0 };
	pthread_mutex_unlock(&ds->lock);
	if (kept && session_binds_make(ds, &copy, out->session_dir, sizeof(out->session_dir),
				       err, sizeof(err)) < 0) {
		log_error("%s: %s", who, err);
		pthread_mutex_lock(&ds->lock);
		e = registry_find_session(&ds->registry, peer->pid);
		if (e) {
			for (size_t i = 0; i < e->count; i++)
				job_mounts_put(ds, e->images[i].mount, td);
			registry_remove_scoped(&ds->registry, e);
		}
		job_mounts_save_locked(ds);
		pthread_mutex_unlock(&ds->lock);
		reply_free(out);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "%s", err);
		close(pidfd);
		return;
	}
	if (kept)
		out->resp.session_dir = out->session_dir;
	/* After the entry is complete: a process that is already gone fires
	 * at once and releases it. A session nobody can end must not exist. */
	if (kept && watch_holder(ds, &copy, pidfd) < 0) {
		log_error("%s: cannot watch the process; releasing its images", who);
		pthread_mutex_lock(&ds->lock);
		e = registry_find_session(&ds->registry, peer->pid);
		if (e)
			drop_scoped(ds, e, td);
		job_mounts_save_locked(ds);
		pthread_mutex_unlock(&ds->lock);
		reply_free(out);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "squashd cannot watch the session's process");
	} else if (!kept) {
		close(pidfd);
	}
}

void scoped_adopt(struct daemon_state *ds)
{
	struct teardown td = { NULL };

	pthread_mutex_lock(&ds->lock);
	for (struct job_entry *e = ds->registry.scoped, *next; e; e = next) {
		next = e->next;
		if (e->session_pid <= 0)
			continue; /* a step whose slurmstepd could not be watched: gc's */
		int pidfd = child_pidfd(e->session_pid);
		bool same = pidfd >= 0 && start_time_of(e->session_pid) == e->session_start;
		if (same && watch_holder(ds, e, pidfd) == 0)
			continue;
		if (pidfd >= 0 && !same)
			close(pidfd);
		if (e->kind == HOLDER_SESSION)
			log_info("the session of pid %d ended while squashd was down; releasing it",
				 (int)e->session_pid);
		else
			log_info("step %u.%u: its slurmstepd ended while squashd was down; releasing it",
				 e->job_id, e->step_id);
		drop_scoped(ds, e, &td);
	}
	/* Session directories no session of the registry owns. */
	DIR *dir = opendir(ds->sessions_dir);
	for (struct dirent *de; dir && (de = readdir(dir));) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (de->d_name[0] == '.' || *end || pid <= 0 || pid > 0x7fffffff)
			continue;
		if (!registry_find_session(&ds->registry, (pid_t)pid)) {
			log_warning("cleaning up the unknown session directory %s/%ld", ds->sessions_dir, pid);
			session_binds_remove(ds, (pid_t)pid);
		}
	}
	if (dir)
		closedir(dir);
	job_mounts_save_locked(ds);
	pthread_mutex_unlock(&ds->lock);
	job_mounts_teardown(ds, &td);
}

/* ---------------------------------------------------------------- list */

void scoped_describe(const struct daemon_state *ds, const struct peer *peer,
		     const struct mount_entry *m, Squash__MountInfo *mi)
{
	size_t n = 0;

	for (const struct job_entry *e = ds->registry.scoped; e; e = e->next)
		n += registry_job_uses(e, m) && (peer->uid == 0 || peer->uid == e->uid);
	if (!n)
		return;
	mi->steps = calloc(n, sizeof(*mi->steps));
	mi->session_pids = calloc(n, sizeof(*mi->session_pids));
	if (!mi->steps || !mi->session_pids)
		return; /* the answer just lacks them */
	for (const struct job_entry *e = ds->registry.scoped; e; e = e->next) {
		if (!registry_job_uses(e, m) || (peer->uid != 0 && peer->uid != e->uid))
			continue;
		if (e->kind == HOLDER_SESSION) {
			mi->session_pids[mi->n_session_pids++] = e->session_pid;
		} else {
			char *s = NULL;
			if (asprintf(&s, "%u.%u", e->job_id, e->step_id) > 0)
				mi->steps[mi->n_steps++] = s;
		}
	}
}

void scoped_free_mount_info(Squash__MountInfo *mi)
{
	for (size_t i = 0; i < mi->n_steps; i++)
		free(mi->steps[i]);
	free(mi->steps);
	free(mi->session_pids);
	mi->steps = NULL;
	mi->session_pids = NULL;
	mi->n_steps = mi->n_session_pids = 0;
}

bool scoped_peer_uses(const struct daemon_state *ds, const struct peer *peer,
		      const struct mount_entry *m)
{
	for (const struct job_entry *e = ds->registry.scoped; e; e = e->next)
		if (e->uid == peer->uid && registry_job_uses(e, m))
			return true;
	return false;
}

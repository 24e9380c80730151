#include "config.h"
#include "core/job_mounts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mount/child_process.h"
#include "clock.h"
#include "mount/fuse_reader.h"
#include "mount/identity.h"
#include "mount/image_open.h"
#include "core/linger.h"
#include "util/log.h"
#include "core/loop_devices.h"
#include "mount/mount_fuse.h"
#include "mount/mount_loop.h"
#include "core/overlay.h"
#include "core/policy.h"
#include "mount/process_watch.h"
#include "core/scoped_mounts.h"
#include "registry/state_file.h"
#include "superblock.h"
#include "mount/unmount.h"

void reply_init(struct reply *r)
{
	memset(r, 0, sizeof(*r));
	squash__response__init(&r->resp);
	r->resp.status = SQUASH__STATUS__OK;
}

void reply_error(struct reply *r, Squash__Status status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
	r->resp.status = status;
	r->resp.message = r->message;
}

void reply_free(struct reply *r)
{
	for (size_t i = 0; i < r->resp.n_job_mounts; i++)
		free(r->resp.job_mounts[i]);
	free(r->resp.job_mounts);
	for (size_t i = 0; i < r->resp.n_mounts; i++) {
		free(r->resp.mounts[i]->job_ids);
		free(r->resp.mounts[i]->image);
		free(r->resp.mounts[i]->mount_point);
		free(r->resp.mounts[i]->loop_device);
		scoped_free_mount_info(r->resp.mounts[i]);
		free(r->resp.mounts[i]);
	}
	free(r->resp.mounts);
	free(r->resp.released_job_ids);
	r->resp.job_mounts = NULL;
	r->resp.mounts = NULL;
	r->resp.released_job_ids = NULL;
	r->resp.n_job_mounts = r->resp.n_mounts = r->resp.n_released_job_ids = 0;
}

static int timeout_ms(const struct daemon_state *ds)
{
	return (int)ds->cfg->request_timeout_s * 1000;
}

static int time_left(long long deadline_ms)
{
	long long left = deadline_ms - squash_now_ms();
	return left > 0 ? (int)left : 0;
}

/* Waits on ds->changed until deadline; false on timeout or stop. Call with
 * ds->lock held. */
static bool wait_changed(struct daemon_state *ds, long long deadline_ms)
{
	struct timespec ts;
	long long now = squash_now_ms();

	if (ds->stopping || now >= deadline_ms)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	long long ns = ts.tv_nsec + (deadline_ms - now) * 1000000LL;
	ts.tv_sec += ns / 1000000000LL;
	ts.tv_nsec = ns % 1000000000LL;
	pthread_cond_timedwait(&ds->changed, &ds->lock, &ts);
	return !ds->stopping;
}

int job_mounts_init(struct daemon_state *ds, const struct squashd_config *cfg)
{
	pthread_condattr_t attr;

	ds->cfg = cfg;
	ds->started_ms = squash_now_ms();
	if (pthread_mutex_init(&ds->lock, NULL) != 0 || pthread_condattr_init(&attr) != 0)
		return -1;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	int rc = pthread_cond_init(&ds->changed, &attr);
	pthread_condattr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

void job_mounts_stop(struct daemon_state *ds)
{
	pthread_mutex_lock(&ds->lock);
	ds->stopping = true;
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
}

int job_mounts_save_locked(struct daemon_state *ds)
{
	char err[PATH_MAX + 256];

	if (state_file_save(&ds->registry, ds->state_path, err, sizeof(err)) < 0) {
		ds->registry_save_errors++;
		if (strcmp(ds->save_error, err))
			log_error("cannot save the registry: %s; new mounts are refused until it can be saved",
				  err);
		snprintf(ds->save_error, sizeof(ds->save_error), "%s", err);
		return -1;
	}
	if (ds->save_error[0]) {
		log_info("the registry can be saved again");
		ds->save_error[0] = '\0';
	}
	return 0;
}

/* Drops one reference (lock held). The last one of a ready mount queues it
 * for teardown; failed and dead mounts are forgotten at once. */
static void put_mount(struct daemon_state *ds, struct mount_entry *m, struct teardown *td)
{
	if (!m || m->refcount == 0 || --m->refcount > 0)
		return;
	switch (m->state) {
	case MOUNT_READY:
		if (linger_begin_locked(ds, m))
			break;
		m->state = MOUNT_UNMOUNTING;
		m->teardown_next = td->head;
		td->head = m;
		break;
	case MOUNT_FAILED:
	case MOUNT_DEAD:
		rmdir(m->mount_point);
		registry_remove_mount(&ds->registry, m);
		break;
	case MOUNT_MOUNTING:    /* its mounter holds a reference */
	case MOUNT_UNMOUNTING:  /* cannot be referenced */
	case MOUNT_LINGERING:   /* holds no references */
		break;
	}
}

static void drop_job(struct daemon_state *ds, struct job_entry *job, struct teardown *td)
{
	overlay_queue_teardown(job, td);
	for (size_t i = 0; i < job->count; i++)
		put_mount(ds, job->images[i].mount, td);
	registry_remove_job(&ds->registry, job);
}

void job_mounts_teardown(struct daemon_state *ds, struct teardown *td)
{
	char err[PATH_MAX + 256];

	/* Overlays first: their lower layers are among td's mounts. */
	for (struct teardown_dir *d = td->dirs, *next; d; d = next) {
		next = d->next;
		overlay_remove_dir(d->path, timeout_ms(ds));
		free(d);
	}
	td->dirs = NULL;
	if (!td->head)
		return;
	/* Unlocked: nobody else touches an UNMOUNTING entry. */
	for (struct mount_entry *m = td->head; m; m = m->teardown_next) {
		if (unmount_image(m->mount_point, m->server_pid, m->server_pidfd, timeout_ms(ds),
				  err, sizeof(err)) != RESULT_OK)
			log_error("unmounting %s (image %s): %s", m->mount_point, m->image, err);
		else
			log_info("unmounted image %s from %s", m->image, m->mount_point);
	}
	/* One save for the whole teardown (the state file never lists
	 * UNMOUNTING entries, so nothing is lost meanwhile). */
	pthread_mutex_lock(&ds->lock);
	for (struct mount_entry *m = td->head, *next; m; m = next) {
		next = m->teardown_next;
		registry_remove_mount(&ds->registry, m);
	}
	job_mounts_save_locked(ds);
	pthread_mutex_unlock(&ds->lock);
	td->head = NULL;
}

/* ---------------------------------------------------------------- FUSE servers */

struct server_watch {
	struct daemon_state *ds;
	unsigned mount_id;
};

static void describe_death(int status, char *buf, size_t len)
{
	if (status < 0)
		snprintf(buf, len, "exited (it was adopted after a squashd restart; its status is unknown)");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

/* A FUSE server died while its mount was in use: the mount is dead. Jobs
 * holding it learn why at their next step; the next job gets a fresh one. */
static void mark_dead_locked(struct daemon_state *ds, struct mount_entry *m, const char *how)
{
	char path[PATH_MAX];

	log_error("FUSE server of image %s (pid %d) %s; its mount %s is dead%s",
		  m->image, (int)m->server_pid, how, m->mount_point,
		  m->refcount ? " and is replaced for new jobs" : "");
	free(m->failure);
	m->failure = strdup(how);
	m->state = MOUNT_DEAD;
	m->server_pid = 0;
	if (m->server_pidfd >= 0)
		close(m->server_pidfd);
	m->server_pidfd = -1;
	snprintf(path, sizeof(path), "%s", m->mount_point);
	/* A dead FUSE mount answers ENOTCONN: detaching it does not block. */
	if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
		log_warning("detaching dead mount %s: %s", path, strerror(errno));
	if (m->refcount == 0) {
		rmdir(path);
		registry_remove_mount(&ds->registry, m);
	}
	job_mounts_save_locked(ds);
}

static void server_exited(void *arg, pid_t pid, int status)
{
	struct server_watch *w = arg;
	struct daemon_state *ds = w->ds;
	char how[128];

	describe_death(status, how, sizeof(how));
	pthread_mutex_lock(&ds->lock);
	struct mount_entry *m = registry_mount_by_id(&ds->registry, w->mount_id);
	/* A server that exits because its mount is being torn down is expected. */
	if (m && (m->state == MOUNT_READY || m->state == MOUNT_LINGERING) && m->server_pid == pid)
		mark_dead_locked(ds, m, how);
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
	free(w);
}

/* Watches a FUSE server of mount m (lock held; m->server_pidfd valid). */
static void watch_server(struct daemon_state *ds, struct mount_entry *m)
{
	struct server_watch *w = malloc(sizeof(*w));
	int fd = m->server_pidfd >= 0 ? fcntl(m->server_pidfd, F_DUPFD_CLOEXEC, 0) : -1;

	if (w && fd >= 0) {
		*w = (struct server_watch){ ds, m->id };
		if (process_watch_add(fd, m->server_pid, server_exited, w) == 0)
			return;
	}
	log_warning("cannot watch the FUSE server of %s (pid %d); its death will go unnoticed",
		    m->mount_point, (int)m->server_pid);
	free(w);
	if (fd >= 0)
		close(fd);
}

/* ---------------------------------------------------------------- mounting */

/* Makes the mount for m (state MOUNTING, held by the caller), unlocked. */
static enum result make_mount(struct daemon_state *ds, struct mount_entry *m, int fd,
			      const struct identity *id, long long deadline_ms,
			      pid_t *server, int *server_pidfd, char *loop_dev, size_t loop_len,
			      char *why, size_t whylen)
{
	if (mkdir(m->mount_point, 0755) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create mount point %s: %s", m->mount_point, strerror(errno));
		return RESULT_NODE_ERROR;
	}
	if (m->key.mode == SQUASH__MOUNT_MODE__FUSE)
		return fuse_mount_image(fd, m->mount_point, id, ds->cfg->squashfuse, time_left(deadline_ms),
					server, server_pidfd, why, whylen);
	if (loop_devices_refuse(ds, m, why, whylen))
		return RESULT_NODE_ERROR;
	return loop_mount_image(fd, m->mount_point, loop_dev, loop_len, why, whylen);
}

/* Mounts (or shares) one image for a job; on RESULT_OK *out holds one more
 * reference for the caller. On failure err holds the reason for the user. */
static enum result mount_one(struct daemon_state *ds, const struct identity *id,
			     const Squash__ImageSpec *spec, struct mount_entry **out,
			     char *err, size_t errlen, long long deadline_ms)
{
	int fd;
	struct stat st;
	struct image_header header;
	char why[SQUASH_PATH_MAX + 512];
	enum result res = image_open_as_user(spec->image, id, time_left(deadline_ms), &fd, &st, &header,
					     why, sizeof(why));
	if (res != RESULT_OK) {
		snprintf(err, errlen, "%s", why);
		return res;
	}
	Squash__MountMode mode = policy_mount_mode(ds->cfg, fd, &st);
	log_context_image(spec->image, mode == SQUASH__MOUNT_MODE__KERNEL ? "kernel" : "fuse");
	if (mode == SQUASH__MOUNT_MODE__FUSE && id->uid == 0) {
		/* FUSE servers parse untrusted images; they never run as root. */
		snprintf(err, errlen, "image %s: jobs of root may only use trusted images "
			 "(its FUSE server would run as root)", spec->image);
		close(fd);
		return RESULT_USER_ERROR;
	}
	enum squash_reader reader = mode == SQUASH__MOUNT_MODE__KERNEL ? SQUASH_READER_KERNEL
									: SQUASH_READER_FUSE;
	if (header.read_errno) {
		snprintf(err, errlen, "image %s: cannot read image: %s", spec->image, strerror(header.read_errno));
		close(fd);
		return RESULT_NODE_ERROR;
	}
	if (squash_superblock_check(header.bytes, header.len, (uint64_t)st.st_size, reader, NULL,
				    why, sizeof(why)) < 0) {
		snprintf(err, errlen, "image %s: %s", spec->image, why);
		close(fd);
		return RESULT_USER_ERROR;
	}
	struct mount_key key = {
		.dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
		.mtime_sec = st.st_mtim.tv_sec, .mtime_nsec = st.st_mtim.tv_nsec,
		.mode = mode,
		.owner_uid = mode == SQUASH__MOUNT_MODE__FUSE ? id->uid : MOUNT_OWNER_ANY,
	};

	pthread_mutex_lock(&ds->lock);
	struct mount_entry *m;
	while ((m = registry_find_mount(&ds->registry, &key))) {
		m->refcount++;
		if (m->state == MOUNT_LINGERING)
			linger_take_over_locked(ds, m);
		while (m->state == MOUNT_MOUNTING && wait_changed(ds, deadline_ms))
			;
		if (m->state == MOUNT_READY) {
			pthread_mutex_unlock(&ds->lock);
			close(fd);
			*out = m;
			return RESULT_OK;
		}
		if (m->state == MOUNT_MOUNTING) { /* gave up waiting */
			m->refcount--; /* the mounter still holds it */
			pthread_mutex_unlock(&ds->lock);
			close(fd);
			snprintf(err, errlen, ds->stopping ? "image %s: squashd is stopping"
				 : "image %s: another job's request is still mounting it (timed out waiting)",
				 spec->image);
			return RESULT_NODE_ERROR;
		}
		if (m->state == MOUNT_FAILED) {
			/* The same file, mode and user: the same outcome. */
			snprintf(err, errlen, "%s", m->failure ? m->failure : "mount failed");
			res = (enum result)m->failure_result;
			struct teardown none = { NULL };
			put_mount(ds, m, &none);
			pthread_mutex_unlock(&ds->lock);
			close(fd);
			return res;
		}
		/* Died right after it was made: let go and mount afresh. */
		struct teardown td = { NULL };
		put_mount(ds, m, &td);
		if (td.head) {
			pthread_mutex_unlock(&ds->lock);
			job_mounts_teardown(ds, &td);
			pthread_mutex_lock(&ds->lock);
		}
	}
	m = registry_new_mount(&ds->registry, &key, spec->image, ds->mount_dir);
	if (!m) {
		pthread_mutex_unlock(&ds->lock);
		close(fd);
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	m->refcount = 1;
	pthread_mutex_unlock(&ds->lock);

	pid_t server = 0;
	int server_pidfd = -1;
	char loop_dev[32] = "";
	res = make_mount(ds, m, fd, id, deadline_ms, &server, &server_pidfd, loop_dev, sizeof(loop_dev),
			 why, sizeof(why));
	close(fd);

	pthread_mutex_lock(&ds->lock);
	if (res == RESULT_OK) {
		m->state = MOUNT_READY;
		m->server_pid = server;
		m->server_pidfd = server_pidfd;
		snprintf(m->loop_device, sizeof(m->loop_device), "%s", loop_dev);
		if (server > 0)
			watch_server(ds, m);
		log_info("mounted image %s at %s (%s%s%s, uid %u)", spec->image, m->mount_point,
			 mode == SQUASH__MOUNT_MODE__FUSE ? "fuse" : "kernel",
			 loop_dev[0] ? " on " : "", loop_dev, (unsigned)id->uid);
		*out = m;
	} else {
		rmdir(m->mount_point);
		snprintf(err, errlen, "image %s: %s", spec->image, why);
		m->state = MOUNT_FAILED;
		m->failure = strdup(err);
		m->failure_result = res;
		struct teardown none = { NULL };
		put_mount(ds, m, &none);
	}
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
	return res;
}

static Squash__Status status_of(enum result r)
{
	return r == RESULT_USER_ERROR ? SQUASH__STATUS__USER_ERROR : SQUASH__STATUS__NODE_ERROR;
}

static void reply_job_mounts(struct reply *out, const struct job_entry *job)
{
	out->resp.job_mounts = calloc(job->count ? job->count : 1, sizeof(*out->resp.job_mounts));
	if (!out->resp.job_mounts) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	for (size_t i = 0; i < job->count; i++) {
		Squash__JobMount *jm = malloc(sizeof(*jm));
		if (!jm) {
			reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
			return;
		}
		squash__job_mount__init(jm);
		jm->image = job->images[i].image;
		jm->target = job->images[i].target;
		jm->source = job->images[i].mount->mount_point;
		jm->mode = job->images[i].mount->key.mode;
		if (job->images[i].overlay) {
			jm->source = job->images[i].overlay;
			jm->has_writable = jm->writable = true;
		}
		out->resp.job_mounts[out->resp.n_job_mounts++] = jm;
	}
}

static bool same_request(const struct job_entry *job, const Squash__MountJobRequest *req)
{
	if (job->uid != req->uid || (!job->pending && job->count != req->n_images))
		return false;
	for (size_t i = 0; i < job->count && i < req->n_images; i++)
		if (strcmp(job->images[i].image, req->images[i]->image) ||
		    strcmp(job->images[i].target, req->images[i]->target) ||
		    (!job->pending && job->images[i].writable !=
		     (req->images[i]->has_writable && req->images[i]->writable)) ||
		    (!job->pending && (!job->images[i].upper != !req->images[i]->upper ||
				       (job->images[i].upper &&
					strcmp(job->images[i].upper, req->images[i]->upper)))))
			return false;
	return true;
}

/* Answers a finished job's mount request again (lock held). */
static void reply_recorded(struct reply *out, const struct job_entry *job)
{
	if (job->status == SQUASH__STATUS__OK)
		reply_job_mounts(out, job);
	else
		reply_error(out, job->status, "%s", job->message ? job->message : "mount failed");
}

/* The images of a request, mounted one after the other (unlocked); the job
 * is pending meanwhile, so a repeated request waits for this one. */
static enum result mount_images(struct daemon_state *ds, struct job_entry *job,
				const Squash__MountJobRequest *req, char *err, size_t errlen,
				long long deadline_ms)
{
	enum result res = policy_check_mount_request(ds->cfg, req, err, errlen);
	struct identity *id = NULL;

	if (res == RESULT_OK) {
		id = malloc(sizeof(*id));
		res = id ? identity_lookup(req->uid, id, err, errlen) : RESULT_NODE_ERROR;
		if (!id)
			snprintf(err, errlen, "out of memory");
	}
	for (size_t i = 0; res == RESULT_OK && i < req->n_images; i++)
		res = job_mounts_add_image(ds, id, job, req->images[i], err, errlen, deadline_ms);
	free(id);
	return res;
}

void job_mounts_mount(struct daemon_state *ds, const Squash__MountJobRequest *req,
		      struct reply *out, struct teardown *td, long long deadline_ms)
{
	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = registry_find_job(&ds->registry, req->job_id);
	/* A repeated prolog (slurmd retry, or our client retrying after a lost
	 * answer) gets the first request's answer, without new references. */
	while (job && job->pending && same_request(job, req) && wait_changed(ds, deadline_ms))
		job = registry_find_job(&ds->registry, req->job_id);
	if (job && job->pending) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, ds->stopping ? SQUASH__STATUS__UNAVAILABLE : SQUASH__STATUS__NODE_ERROR,
			    ds->stopping ? "squashd is stopping" :
			    "another mount request for job %u is still at work on this node", req->job_id);
		return;
	}
	if (job && same_request(job, req)) {
		reply_recorded(out, job);
		pthread_mutex_unlock(&ds->lock);
		return;
	}
	if (job) {
		/* A requeued job reusing its id: start from nothing. */
		log_info("job %u: replacing earlier mounts of this job id", req->job_id);
		drop_job(ds, job, td);
	}
	if (ds->stopping) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__UNAVAILABLE, "squashd is stopping");
		return;
	}
	/* Degraded: a mount this squashd could not record would be leaked by
	 * the next one. Try again; refuse while it fails. */
	if (ds->save_error[0] && job_mounts_save_locked(ds) < 0) {
		char cause[sizeof(ds->save_error)];
		snprintf(cause, sizeof(cause), "%s", ds->save_error);
		pthread_mutex_unlock(&ds->lock);
		log_error("job %u (uid %u): refused: the registry cannot be saved: %s", req->job_id,
			  (unsigned)req->uid, cause);
		reply_error(out, SQUASH__STATUS__NODE_ERROR,
			    "squashd on this node cannot save its registry (%s); it mounts nothing until it can",
			    cause);
		return;
	}
	job = registry_add_job(&ds->registry, req->job_id, req->uid);
	if (!job) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	job->pending = true;
	pthread_mutex_unlock(&ds->lock);

	char err[SQUASH_PATH_MAX + 1024];
	enum result res = mount_images(ds, job, req, err, sizeof(err), deadline_ms);
	if (res == RESULT_OK)
		res = overlay_job_mount(ds, job, err, sizeof(err));

	pthread_mutex_lock(&ds->lock);
	job->pending = false;
	if (res == RESULT_OK && job_mounts_save_locked(ds) < 0) {
		snprintf(err, sizeof(err), "squashd on this node cannot save its registry (%s); "
			 "the job's mounts were undone", ds->save_error);
		res = RESULT_NODE_ERROR;
	}
	if (res == RESULT_OK) {
		log_info("job %u: %zu image(s) ready for uid %u", req->job_id, job->count, (unsigned)req->uid);
		reply_job_mounts(out, job);
	} else if (ds->stopping) {
		/* Cut short by the stop, not failed: forget the job so that the
		 * client's retry, answered by the next squashd, starts afresh. */
		log_info("job %u: mount request cut short by the stop (%s); the client asks again",
			 req->job_id, err);
		drop_job(ds, job, td);
		reply_error(out, SQUASH__STATUS__UNAVAILABLE, "squashd is stopping");
		job_mounts_save_locked(ds);
	} else {
		/* Keep the job, failed and without mounts, so its steps can tell
		 * the user why; the epilog's release (or gc) removes it. */
		overlay_queue_teardown(job, td);
		for (size_t i = 0; i < job->count; i++) {
			put_mount(ds, job->images[i].mount, td);
			job->images[i].mount = NULL;
		}
		if (res == RESULT_NODE_ERROR)
			log_error("job %u (uid %u): %s", req->job_id, (unsigned)req->uid, err);
		else
			log_info("job %u (uid %u) refused: %s", req->job_id, (unsigned)req->uid, err);
		registry_job_set_failure(job, status_of(res), err);
		reply_error(out, status_of(res), "%s", err);
		job_mounts_save_locked(ds);
	}
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
}

/* Waits until job_id is not pending (lock held); returns the job or NULL. */
static struct job_entry *settled_job(struct daemon_state *ds, uint32_t job_id, long long deadline_ms)
{
	struct job_entry *job = registry_find_job(&ds->registry, job_id);
	while (job && job->pending && wait_changed(ds, deadline_ms))
		job = registry_find_job(&ds->registry, job_id);
	return job;
}

void job_mounts_release(struct daemon_state *ds, uint32_t job_id, struct reply *out,
			struct teardown *td, long long deadline_ms)
{
	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = settled_job(ds, job_id, deadline_ms);
	if (job && job->pending) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__UNAVAILABLE,
			    "the mount request of job %u is still at work; ask again", job_id);
		return;
	}
	if (!job) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__OK, "job %u has no mounts on this node", job_id);
		return;
	}
	drop_job(ds, job, td);
	log_info("job %u released", job_id);
	job_mounts_save_locked(ds);
	pthread_cond_broadcast(&ds->changed);
	pthread_mutex_unlock(&ds->lock);
}

bool job_mounts_release_gone(struct daemon_state *ds, uint32_t job_id, struct teardown *td)
{
	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = registry_find_job(&ds->registry, job_id);
	bool found = job && !job->pending;
	if (found) {
		drop_job(ds, job, td);
		ds->gc_releases++;
		job_mounts_save_locked(ds);
	}
	pthread_mutex_unlock(&ds->lock);
	return found;
}

void job_mounts_step_info(struct daemon_state *ds, const struct peer *peer, uint32_t job_id,
			  struct reply *out, long long deadline_ms)
{
	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = settled_job(ds, job_id, deadline_ms);
	if (job && peer->uid != 0 && peer->uid != job->uid)
		job = NULL; /* other users' jobs do not exist for this peer */
	if (!job) {
		if (ds->state_lost[0])
			reply_error(out, SQUASH__STATUS__NOT_FOUND,
				    "squashd on this node has no images for job %u; it lost its registry "
				    "when it last started (%s)", job_id, ds->state_lost);
		else
			reply_error(out, SQUASH__STATUS__NOT_FOUND,
				    "squashd on this node has no images for job %u", job_id);
	} else if (job->pending) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR,
			    "the job prolog's mount request for job %u is still at work", job_id);
	} else if (job->status != SQUASH__STATUS__OK) {
		reply_error(out, job->status, "%s", job->message ? job->message : "mount failed");
	} else {
		for (size_t i = 0; i < job->count; i++) {
			const struct mount_entry *m = job->images[i].mount;
			if (!m) {
				reply_error(out, SQUASH__STATUS__NODE_ERROR,
					    "the mount of image %s was lost while squashd restarted",
					    job->images[i].image);
				break;
			}
			if (m->state == MOUNT_DEAD) {
				reply_error(out, SQUASH__STATUS__NODE_ERROR,
					    "the FUSE server of image %s on this node %s; "
					    "the job's mount of it is gone (new jobs get a fresh one)",
					    m->image, m->failure ? m->failure : "died");
				break;
			}
		}
		if (out->resp.status == SQUASH__STATUS__OK) {
			reply_job_mounts(out, job);
			out->resp.base_dir = (char *)ds->cfg->base_dir;
			out->resp.mount_dir = ds->mount_dir;
			out->resp.has_job_uid = true;
			out->resp.job_uid = job->uid;
		}
	}
	pthread_mutex_unlock(&ds->lock);
}

static const char *state_name(enum mount_state s)
{
	switch (s) {
	case MOUNT_MOUNTING: return "mounting";
	case MOUNT_READY: return "ready";
	case MOUNT_FAILED: return "failed";
	case MOUNT_DEAD: return "dead";
	case MOUNT_UNMOUNTING: return "unmounting";
	case MOUNT_LINGERING: return "lingering";
	}
	return "?";
}

/* A copy of m for the answer: the registry may change once unlocked. */
static Squash__MountInfo *describe_mount(struct daemon_state *ds, const struct peer *peer,
					 const struct mount_entry *m)
{
	Squash__MountInfo *mi = calloc(1, sizeof(*mi));
	if (!mi)
		return NULL;
	squash__mount_info__init(mi);
	mi->image = strdup(m->image);
	mi->mode = m->key.mode;
	mi->mount_point = strdup(m->mount_point);
	mi->refcount = m->refcount;
	mi->state = (char *)state_name(m->state);
	mi->reader = (char *)(m->key.mode == SQUASH__MOUNT_MODE__KERNEL ? KERNEL_READER_DESCRIPTION
			      : ds->fuse_reader ? ds->fuse_reader : "squashfuse_ll");
	mi->job_ids = calloc(m->refcount + 1, sizeof(*mi->job_ids));
	mi->loop_device = m->loop_device[0] ? strdup(m->loop_device) : NULL;
	if (!mi->image || !mi->mount_point || !mi->job_ids || (m->loop_device[0] && !mi->loop_device)) {
		free(mi->image);
		free(mi->mount_point);
		free(mi->job_ids);
		free(mi->loop_device);
		free(mi);
		return NULL;
	}
	for (const struct job_entry *j = ds->registry.jobs; j; j = j->next)
		if (registry_job_uses(j, m) && (peer->uid == 0 || peer->uid == j->uid) &&
		    mi->n_job_ids <= m->refcount)
			mi->job_ids[mi->n_job_ids++] = j->job_id;
	if (m->key.owner_uid != MOUNT_OWNER_ANY) {
		mi->has_owner_uid = true;
		mi->owner_uid = m->key.owner_uid;
	}
	if (m->server_pid > 0) {
		mi->has_server_pid = true;
		mi->server_pid = m->server_pid;
	}
	scoped_describe(ds, peer, m, mi);
	if (m->state == MOUNT_LINGERING) {
		mi->has_linger_left_s = true;
		mi->linger_left_s = linger_left_s(m, squash_now_ms());
	}
	return mi;
}

void job_mounts_list(struct daemon_state *ds, const struct peer *peer, struct reply *out)
{
	pthread_mutex_lock(&ds->lock);
	size_t n = 0;
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		n++;
	out->resp.mounts = calloc(n ? n : 1, sizeof(*out->resp.mounts));
	if (!out->resp.mounts) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next) {
		/* A user's lingering FUSE mount has no job but is still theirs. */
		bool visible = peer->uid == 0 ||
			       (m->state == MOUNT_LINGERING && m->key.owner_uid == peer->uid);
		for (const struct job_entry *j = ds->registry.jobs; j && !visible; j = j->next)
			visible = j->uid == peer->uid && registry_job_uses(j, m);
		visible = visible || scoped_peer_uses(ds, peer, m);
		if (!visible)
			continue;
		Squash__MountInfo *mi = describe_mount(ds, peer, m);
		if (!mi) {
			pthread_mutex_unlock(&ds->lock);
			reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
			return;
		}
		out->resp.mounts[out->resp.n_mounts++] = mi;
	}
	pthread_mutex_unlock(&ds->lock);
}

static void add_problem(struct reply *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_problem(struct reply *out, const char *fmt, ...)
{
	size_t i = out->node.n_problems;
	va_list ap;

	if (i >= sizeof(out->problems) / sizeof(out->problems[0]))
		return;
	va_start(ap, fmt);
	vsnprintf(out->problem_text[i], sizeof(out->problem_text[i]), fmt, ap);
	va_end(ap);
	out->problems[i] = out->problem_text[i];
	out->node.problems = out->problems;
	out->node.n_problems = i + 1;
}

void job_mounts_status(struct daemon_state *ds, struct reply *out)
{
	Squash__NodeStatus *st = &out->node;
	long long now = squash_now_ms();

	squash__node_status__init(st);
	pthread_mutex_lock(&ds->lock);
	/* A failed save is retried here so health clears as soon as it can. */
	if (ds->save_error[0])
		job_mounts_save_locked(ds);
	st->version = (char *)PACKAGE_VERSION;
	st->uptime_s = (uint64_t)((now - ds->started_ms) / 1000);
	for (const struct mount_entry *m = ds->registry.mounts; m; m = m->next) {
		if (m->state == MOUNT_DEAD) {
			st->mounts_dead++;
			add_problem(out, "dead FUSE server for image %s (it %s); %u job(s) still hold its mount",
				    m->image, m->failure ? m->failure : "died", m->refcount);
		} else if (m->state == MOUNT_LINGERING) {
			/* Expected: kept for the next job, not a leak. */
			st->has_mounts_lingering = true;
			st->mounts_lingering++;
		} else if (m->state == MOUNT_READY) {
			if (m->key.mode == SQUASH__MOUNT_MODE__KERNEL)
				st->mounts_kernel++;
			else
				st->mounts_fuse++;
		}
	}
	for (const struct job_entry *j = ds->registry.jobs; j; j = j->next) {
		st->jobs++;
		st->jobs_failed += j->status != SQUASH__STATUS__OK;
	}
	st->has_steps = st->has_sessions = true;
	for (const struct job_entry *e = ds->registry.scoped; e; e = e->next) {
		if (e->kind == HOLDER_STEP)
			st->steps++;
		else if (e->kind == HOLDER_SESSION)
			st->sessions++;
	}
	st->requests_in_progress = ds->requests_in_progress;
	st->requests = ds->requests;
	st->requests_failed = ds->requests_failed;
	st->gc_releases = ds->gc_releases;
	if (ds->last_gc_ms) {
		st->has_last_gc_age_s = true;
		st->last_gc_age_s = (now - ds->last_gc_ms) / 1000;
	}
	if (ds->save_error[0]) {
		snprintf(out->message, sizeof(out->message), "%s", ds->save_error);
		st->registry_error = out->message;
		add_problem(out, "registry not saved: %s (new mounts are refused)", ds->save_error);
	}
	pthread_mutex_unlock(&ds->lock);
	out->resp.node = st;
}

/* ---------------------------------------------------------------- adoption */

static bool known_mount_point(struct daemon_state *ds, const char *path)
{
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		if (!strcmp(m->mount_point, path))
			return true;
	for (struct job_entry *j = ds->registry.jobs; j; j = j->next)
		if (j->overlay_dir && !strcmp(j->overlay_dir, path))
			return true;
	return false;
}

/* Whether an adopted FUSE server still runs; opens its pidfd. */
static bool adopt_server(struct mount_entry *m)
{
	char path[64], comm[64] = "";
	FILE *f;

	m->server_pidfd = child_pidfd(m->server_pid);
	if (m->server_pidfd < 0)
		return false;
	/* After a reboot-less restart the pid may belong to something else. */
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)m->server_pid);
	f = fopen(path, "re");
	if (f) {
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
	}
	return strncmp(comm, "squashfuse", 10) == 0;
}
/* Adds to each mount's refcount one per job, step or session image that
 * names it (the state file stores no counts). */
static void count_references(struct daemon_state *ds)
{
	struct job_entry *lists[] = { ds->registry.jobs, ds->registry.scoped };

	for (size_t l = 0; l < 2; l++)
		for (struct job_entry *j = lists[l]; j; j = j->next)
			for (size_t i = 0; i < j->count; i++)
				if (j->images[i].mount)
					j->images[i].mount->refcount++;
}


void job_mounts_adopt(struct daemon_state *ds)
{
	char err[PATH_MAX + 256];
	struct mount_entry *next;
	struct teardown td = { NULL };

	pthread_mutex_lock(&ds->lock);
	for (struct job_entry *j = ds->registry.jobs; j; j = j->next) {
		if (j->overlay_dir && !overlay_job_intact(j)) {
			log_warning("job %u: its writable overlay in %s vanished while squashd was down",
				    j->job_id, j->overlay_dir);
			overlay_queue_teardown(j, &td);
			registry_job_set_failure(j, SQUASH__STATUS__NODE_ERROR,
						 "the job's writable overlay vanished while squashd was restarting");
		}
	}
	/* Count references first: a mount found dead below must stay while
	 * jobs still point at it. */
	count_references(ds);
	for (struct mount_entry *m = ds->registry.mounts; m; m = next) {
		next = m->next;
		if (is_mount_point(m->mount_point) > 0) {
			if (m->key.mode == SQUASH__MOUNT_MODE__FUSE &&
			    (m->server_pid <= 0 || !adopt_server(m))) {
				log_info("adopted mount of %s at %s", m->image, m->mount_point);
				mark_dead_locked(ds, m, "was gone when squashd restarted");
				continue;
			}
			if (m->server_pid > 0)
				watch_server(ds, m);
			log_info("adopted mount of %s at %s", m->image, m->mount_point);
			continue;
		}
		log_warning("mount of %s at %s vanished while squashd was down", m->image, m->mount_point);
		for (struct job_entry *j = ds->registry.jobs; j; j = j->next) {
			if (!registry_job_uses(j, m))
				continue;
			for (size_t i = 0; i < j->count; i++)
				if (j->images[i].mount == m)
					j->images[i].mount = NULL;
			registry_job_set_failure(j, SQUASH__STATUS__NODE_ERROR,
						 "a mount of this job vanished while squashd was restarting");
		}
		for (struct job_entry *e = ds->registry.scoped; e; e = e->next)
			for (size_t i = 0; i < e->count; i++)
				if (e->images[i].mount == m)
					e->images[i].mount = NULL;
		rmdir(m->mount_point);
		registry_remove_mount(&ds->registry, m);
	}
	/* Recount references from the jobs (the file stores none). */
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		m->refcount = 0;
	count_references(ds);
	/* Mounts no job holds any more (released while squashd was down). */
	for (struct mount_entry *m = ds->registry.mounts; m; m = next) {
		next = m->next;
		if (m->refcount > 0 && m->state == MOUNT_LINGERING)
			m->state = MOUNT_READY; /* a job still names it */
		if (m->refcount == 0 && m->state != MOUNT_LINGERING) {
			/* (Lingering ones keep their recorded expiry; linger.c.) */
			if (m->state == MOUNT_DEAD) {
				rmdir(m->mount_point);
				registry_remove_mount(&ds->registry, m);
			} else {
				m->refcount = 1;
				put_mount(ds, m, &td);
			}
		}
	}
	pthread_mutex_unlock(&ds->lock);
	job_mounts_teardown(ds, &td);

	DIR *dir = opendir(ds->mount_dir);
	if (dir) {
		for (struct dirent *de; (de = readdir(dir));) {
			if (de->d_name[0] == '.')
				continue;
			char path[PATH_MAX];
			pthread_mutex_lock(&ds->lock);
			bool known = snprintf(path, sizeof(path), "%s/%s", ds->mount_dir, de->d_name) >= (int)sizeof(path) ||
				     known_mount_point(ds, path);
			pthread_mutex_unlock(&ds->lock);
			if (known)
				continue;
			log_warning("cleaning up unknown leftover %s", path);
			if (overlay_dir_name(de->d_name))
				overlay_remove_dir(path, timeout_ms(ds));
			else if (unmount_image(path, 0, -1, timeout_ms(ds), err, sizeof(err)) != RESULT_OK)
				log_error("cannot clean up %s: %s", path, err);
		}
		closedir(dir);
	}
	pthread_mutex_lock(&ds->lock);
	job_mounts_save_locked(ds);
	pthread_mutex_unlock(&ds->lock);
}

/* ---------------------------------------------------------------- for scoped_mounts.c */

enum result job_mounts_add_image(struct daemon_state *ds, const struct identity *id,
				 struct job_entry *e, const Squash__ImageSpec *spec,
				 char *err, size_t errlen, long long deadline_ms)
{
	struct mount_entry *m = NULL;
	enum result res = mount_one(ds, id, spec, &m, err, errlen, deadline_ms);

	if (res != RESULT_OK)
		return res;
	pthread_mutex_lock(&ds->lock);
	if (registry_job_add_image(e, spec->image, spec->target, m) < 0) {
		struct teardown td = { NULL };
		put_mount(ds, m, &td);
		pthread_mutex_unlock(&ds->lock);
		job_mounts_teardown(ds, &td);
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

void job_mounts_put(struct daemon_state *ds, struct mount_entry *m, struct teardown *td)
{
	put_mount(ds, m, td);
}

bool job_mounts_wait(struct daemon_state *ds, long long deadline_ms)
{
	return wait_changed(ds, deadline_ms);
}

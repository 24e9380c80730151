#include "config.h"
#include "core/overlay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <signal.h>
#include <unistd.h>

#include "clock.h"
#include "core/given_up_mounts.h"
#include "mount/fuse_abort.h"
#include "process/identity.h"
#include "util/log.h"
#include "mount/overlay_upper.h"
#include "mount/unmount.h"

static bool any_writable(const struct job_entry *job)
{
	for (size_t i = 0; i < job->count; i++)
		if (job->images[i].writable)
			return true;
	return false;
}

/* The mount of one overlay, made where the request can give up on it:
 * overlayfs asks its lower layer (a user's reader's FUSE mount) for
 * STATFS, LOOKUP and GETATTR, and a stopped reader never answers. Once
 * the request gave up, the job's whole directory is the late function's:
 * it removes the directory after the mount returned (made or not). */
struct overlay_call {
	char point[PATH_MAX];
	char dir[PATH_MAX];
	char opts[3 * PATH_MAX + 64];
	int timeout_ms;
	int err; /* the mount's errno, 0 when it was made */
};

static void overlay_call_mount(void *arg)
{
	struct overlay_call *c = arg;

	c->err = mount("overlay", c->point, "overlay", MS_NOSUID | MS_NODEV, c->opts) < 0 ? errno : 0;
}

static void overlay_call_late(void *arg)
{
	struct overlay_call *c = arg;

	overlay_remove_dir(c->dir, c->timeout_ms);
	log_info("the overlay %s that a request gave up on has %s; its directory is removed", c->point,
		 c->err ? "failed" : "been made after all");
}

/* Kills the FUSE server of lower (the image's node-level mount): it did
 * not answer the overlay mount in time. The mount recovers as after any
 * reader's death, and the overlay mount's thread ends. */
/* How long a reader suspected of silence is given to answer a look at
 * its root before it is killed. */
#define LOWER_PROBE_MS 1000

static bool kill_lower_server(struct daemon_state *ds, const struct mount_entry *lower)
{
	bool killed;

	pthread_mutex_lock(&ds->lock);
	/* A server of its own (no kept connection to restart it on): the
	 * mount ends with it, and its connection too, or a copy of the
	 * user's would keep the child that looks at it waiting. */
	if (!lower->keep && lower->server_pidfd >= 0)
		fuse_abort_mount(lower->mount_point);
	killed = lower->server_pidfd >= 0 &&
		 syscall(SYS_pidfd_send_signal, lower->server_pidfd, SIGKILL, NULL, 0) == 0;
	if (killed)
		log_warning("killed FUSE server pid %d of image %s: it did not answer the overlay "
			    "mount of a :rw image in time", (int)lower->server_pid, lower->image);
	pthread_mutex_unlock(&ds->lock);
	return killed;
}

/* Upper directory for image i, looking like the image's root: overlayfs
 * shows the upper root's owner and mode, and a user must be able to write
 * where the image lets them. The root's attributes are read as the user
 * (the lower layer may be their reader's FUSE mount), without set-uid and
 * set-gid bits (overlay_lower_root). *gave_up: the mount did not return
 * by deadline_ms; dir is then the mount's thread's to remove. */
static enum result make_upper(struct daemon_state *ds, const char *dir, size_t i,
			      const struct mount_entry *lower_mount, const struct identity *id,
			      long long deadline_ms, bool *gave_up, char *err, size_t errlen)
{
	char upper[PATH_MAX], work[PATH_MAX], point[PATH_MAX];
	const char *lower = lower_mount->mount_point;
	int timeout_ms = daemon_time_left(deadline_ms);
	uid_t uid;
	gid_t gid;
	mode_t mode;

	if (registry_overlay_path(upper, sizeof(upper), dir, 'u', i) ||
	    registry_overlay_path(work, sizeof(work), dir, 'w', i) ||
	    registry_overlay_path(point, sizeof(point), dir, 'o', i)) {
		snprintf(err, errlen, "overlay directory %s: path too long", dir);
		return RESULT_NODE_ERROR;
	}
	/* overlayfs splits its options at ',' and layers at ':' (state_dir is
	 * the admin's choice, but must not turn into other options). */
	if (strpbrk(dir, ",:\\") || strpbrk(lower, ",:\\")) {
		snprintf(err, errlen, "cannot mount an overlay below %s: state_dir must not contain "
			 "',', ':' or '\\'", dir);
		return RESULT_NODE_ERROR;
	}
	bool timed_out = false;
	enum result res = overlay_lower_root(lower, id, timeout_ms, &uid, &gid, &mode, &timed_out,
					     err, errlen);
	/* The child asking waits on the reader until it answers or dies: as
	 * for the mount below, the silent reader goes, and the child with
	 * it (the request is resent to the next reader, which answers). */
	if (timed_out)
		kill_lower_server(ds, lower_mount);
	if (res != RESULT_OK)
		return res;
	if (mkdir(upper, 0700) < 0 || mkdir(work, 0700) < 0 || mkdir(point, 0755) < 0 ||
	    chown(upper, uid, gid) < 0 || chmod(upper, mode) < 0) {
		snprintf(err, errlen, "cannot prepare the overlay in %s: %s", dir, strerror(errno));
		return RESULT_NODE_ERROR;
	}
	struct overlay_call *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	snprintf(c->point, sizeof(c->point), "%s", point);
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	c->timeout_ms = timeout_ms > 1000 ? timeout_ms : 1000;
	if (snprintf(c->opts, sizeof(c->opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper,
		     work) >= (int)sizeof(c->opts)) {
		snprintf(err, errlen, "overlay options too long");
		free(c);
		return RESULT_NODE_ERROR;
	}
	int done = given_up_mounts_call(id->uid, overlay_call_mount, overlay_call_late, free, c,
					deadline_ms, &res, err, errlen);
	if (done < 0) {
		free(c);
		return res;
	}
	if (!done) {
		*gave_up = true;
		kill_lower_server(ds, lower_mount);
		snprintf(err, errlen, "the overlay of the :rw image %s did not mount within the request's "
			 "deadline: the FUSE server of the image (your squash-reader) did not answer "
			 "(stopped or hung); squashd killed it, and its mounts restart",
			 lower_mount->image);
		return RESULT_NODE_ERROR;
	}
	int mount_err = c->err;
	free(c);
	if (mount_err) {
		snprintf(err, errlen, "cannot mount an overlay on %s: %s", lower, strerror(mount_err));
		return RESULT_NODE_ERROR;
	}
	return RESULT_OK;
}

/* Another job of the same user on this node keeps its changes in the
 * same directory (ds->lock held). Two overlays on one upper directory
 * corrupt it. Only the user's own jobs count: an upper directory must be
 * the user's (overlay_upper.c), and another user's job that merely names
 * it, still mounting, must not block the owner. */
static const struct job_entry *upper_in_use(struct daemon_state *ds, const struct job_entry *job,
					    const char *upper)
{
	for (const struct job_entry *j = ds->registry.jobs; j; j = j->next) {
		if (j == job || j->uid != job->uid || j->status != SQUASH__STATUS__OK)
			continue;
		for (size_t i = 0; i < j->count; i++)
			if (j->images[i].upper && !strcmp(j->images[i].upper, upper))
				return j;
	}
	return NULL;
}

/* The overlay of image i with the user's own upper directory. */
static enum result mount_named(struct daemon_state *ds, struct job_entry *job, size_t i, const char *dir,
			       const struct identity *id, long long deadline_ms, char *err, size_t errlen)
{
	char point[PATH_MAX];
	const char *upper = job->images[i].upper;

	if (upper[0] != '/') {
		snprintf(err, errlen, "upper directory %s: not an absolute path", upper);
		return RESULT_USER_ERROR;
	}
	pthread_mutex_lock(&ds->lock);
	const struct job_entry *other = upper_in_use(ds, job, upper);
	uint32_t other_id = other ? other->job_id : 0;
	pthread_mutex_unlock(&ds->lock);
	if (other) {
		snprintf(err, errlen, "upper directory %s is in use by job %u on this node; "
			 "one job at a time may keep its changes there", upper, other_id);
		return RESULT_USER_ERROR;
	}
	if (registry_overlay_path(point, sizeof(point), dir, 'o', i) || mkdir(point, 0755) < 0) {
		snprintf(err, errlen, "cannot prepare the overlay in %s: %s", dir, strerror(errno));
		return RESULT_NODE_ERROR;
	}
	const struct mount_entry *lower = job->images[i].mount;
	bool timed_out;
	enum result res = overlay_mount_named_upper(upper, id, lower->mount_point, point,
						    daemon_time_left(deadline_ms), &timed_out, err, errlen);
	/* As for an overlay of squashd's own upper: the mount waits on the
	 * image's reader, and its child with it, until the reader answers or
	 * dies (the request then goes to the next reader, which answers). But
	 * DIR's file system may be the slow one: the reader goes only when it
	 * does not answer a STATFS either. */
	if (timed_out && overlay_lower_silent(lower->mount_point, id, LOWER_PROBE_MS)) {
		size_t used = strlen(err);

		if (kill_lower_server(ds, lower) && used < errlen)
			snprintf(err + used, errlen - used, "; the image's FUSE server (your "
				 "squash-reader) did not answer: squashd killed it, and its mounts restart");
	}
	return res;
}

enum result overlay_job_mount(struct daemon_state *ds, const struct squashd_config *cfg,
			      struct job_entry *job, char *err, size_t errlen, long long deadline_ms)
{
	bool gave_up = false;
	struct identity *id = NULL;
	char dir[PATH_MAX], opts[64], *points[SQUASH_MAX_IMAGES] = { NULL };

	unsigned long long size = cfg->overlay_size;

	if (!any_writable(job))
		return RESULT_OK;
	if (size == 0) {
		snprintf(err, errlen, "writable images (:rw) are not enabled on this node "
			 "(overlay_size = 0 in squashd.conf); ask your site or drop :rw");
		return RESULT_USER_ERROR;
	}
	/* The job's user reads the lower roots and opens :rw=DIR. */
	enum result res = (id = malloc(sizeof(*id))) ? identity_lookup(job->uid, id, err, errlen)
						      : RESULT_NODE_ERROR;
	if (res != RESULT_OK) {
		if (!id)
			snprintf(err, errlen, "out of memory");
		free(id);
		return res;
	}
	pthread_mutex_lock(&ds->lock);
	unsigned dir_id = ++ds->registry.next_mount_id; /* unique among mN and jN */
	pthread_mutex_unlock(&ds->lock);
	if (snprintf(dir, sizeof(dir), "%s/j%u", ds->mount_dir, dir_id) >= (int)sizeof(dir)) {
		snprintf(err, errlen, "overlay directory path too long");
		free(id);
		return RESULT_NODE_ERROR;
	}
	snprintf(opts, sizeof(opts), "size=%llu,mode=0700", size);
	if (mkdir(dir, 0700) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		free(id);
		return RESULT_NODE_ERROR;
	}
	/* No noexec: jobs run what they install in their overlay. */
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
		snprintf(err, errlen, "cannot mount the overlay tmpfs on %s: %s", dir, strerror(errno));
		rmdir(dir);
		free(id);
		return RESULT_NODE_ERROR;
	}
	for (size_t i = 0; i < job->count && res == RESULT_OK; i++) {
		char point[PATH_MAX];
		if (!job->images[i].writable)
			continue;
		if (i >= 32) { /* the state file records overlays in a 32-bit mask */
			snprintf(err, errlen, "image %s: :rw is possible on the first 32 images of a job "
				 "only; list it earlier", job->images[i].image);
			res = RESULT_USER_ERROR;
			continue;
		}
		if (job->images[i].upper) {
			res = mount_named(ds, job, i, dir, id, deadline_ms, err, errlen);
			if (res != RESULT_OK)
				continue;
		} else if ((res = make_upper(ds, dir, i, job->images[i].mount, id, deadline_ms, &gave_up,
					     err, errlen)) != RESULT_OK) {
			continue;
		}
		if (registry_overlay_path(point, sizeof(point), dir, 'o', i) || !(points[i] = strdup(point))) {
			snprintf(err, errlen, "out of memory");
			res = RESULT_NODE_ERROR;
		}
	}
	free(id);
	char *dir_copy = res == RESULT_OK ? strdup(dir) : NULL;
	if (res == RESULT_OK && !dir_copy) {
		snprintf(err, errlen, "out of memory");
		res = RESULT_NODE_ERROR;
	}
	if (res != RESULT_OK) {
		for (size_t i = 0; i < SQUASH_MAX_IMAGES; i++)
			free(points[i]);
		if (!gave_up) /* else the late mount's thread removes it */
			overlay_remove_dir(dir, (int)cfg->request_timeout_s * 1000);
		return res;
	}
	pthread_mutex_lock(&ds->lock);
	job->overlay_dir = dir_copy;
	for (size_t i = 0; i < job->count; i++)
		job->images[i].overlay = points[i];
	pthread_mutex_unlock(&ds->lock);
	log_info("job %u: writable overlay(s) in %s (tmpfs of %llu bytes)", job->job_id, dir,
		 size);
	return RESULT_OK;
}

void overlay_queue_teardown(struct job_entry *job, struct teardown *td)
{
	if (!job->overlay_dir)
		return;
	size_t n = strlen(job->overlay_dir) + 1;
	struct teardown_dir *d = malloc(sizeof(*d) + n);
	if (!d) {
		/* Left for the next squashd's clean-up of unknown leftovers. */
		log_error("out of memory: cannot tear down the overlay %s of job %u", job->overlay_dir,
			  job->job_id);
	} else {
		memcpy(d->path, job->overlay_dir, n);
		d->remove = overlay_remove_dir;
		d->next = td->dirs;
		td->dirs = d;
	}
	/* Steps must not bind them from now on. */
	for (size_t i = 0; i < job->count; i++) {
		free(job->images[i].overlay);
		job->images[i].overlay = NULL;
	}
	free(job->overlay_dir);
	job->overlay_dir = NULL;
}

void overlay_remove_dir(const char *dir, int timeout_ms)
{
	char err[PATH_MAX + 256];
	DIR *d = opendir(dir);

	/* The overlays first: they live inside the tmpfs. */
	if (d) {
		for (struct dirent *de; (de = readdir(d));) {
			char path[PATH_MAX];
			if (de->d_name[0] != 'o' ||
			    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
				continue;
			if (unmount_image(path, 0, -1, 0, -1, timeout_ms, err, sizeof(err)) != RESULT_OK)
				log_error("removing overlay %s: %s", path, err);
		}
		closedir(d);
	}
	if (unmount_image(dir, 0, -1, 0, -1, timeout_ms, err, sizeof(err)) != RESULT_OK)
		log_error("removing overlay tmpfs %s: %s", dir, err);
	else
		log_info("removed overlay directory %s", dir);
}

bool overlay_job_intact(const struct job_entry *job)
{
	if (job->overlay_dir && is_mount_point(job->overlay_dir) <= 0)
		return false;
	for (size_t i = 0; i < job->count; i++)
		if (job->images[i].overlay && is_mount_point(job->images[i].overlay) <= 0)
			return false;
	return true;
}

bool overlay_dir_name(const char *name)
{
	return name[0] == 'j';
}


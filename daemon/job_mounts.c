#include "config.h"
#include "job_mounts.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "identity.h"
#include "image_open.h"
#include "log.h"
#include "mount_fuse.h"
#include "mount_loop.h"
#include "policy.h"
#include "state_file.h"
#include "superblock.h"
#include "unmount.h"

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
		free(r->resp.mounts[i]);
	}
	free(r->resp.mounts);
	r->resp.job_mounts = NULL;
	r->resp.mounts = NULL;
	r->resp.n_job_mounts = r->resp.n_mounts = 0;
}

static int timeout_ms(const struct daemon_state *ds)
{
	return (int)ds->cfg->request_timeout_s * 1000;
}

void job_mounts_save(struct daemon_state *ds)
{
	char err[PATH_MAX + 256];
	if (state_file_save(&ds->registry, ds->state_path, err, sizeof(err)) < 0)
		log_error("cannot save the registry: %s", err);
}

/* Drops one reference; the last one unmounts. */
static void put_mount(struct daemon_state *ds, struct mount_entry *m)
{
	if (!m || m->refcount == 0 || --m->refcount > 0)
		return;
	char err[PATH_MAX + 256];
	if (unmount_image(m->mount_point, m->server_pid, timeout_ms(ds), err, sizeof(err)) != RESULT_OK)
		log_error("unmounting %s (image %s): %s", m->mount_point, m->image, err);
	else
		log_info("unmounted image %s from %s", m->image, m->mount_point);
	registry_remove_mount(&ds->registry, m);
}

static void drop_job(struct daemon_state *ds, struct job_entry *job)
{
	for (size_t i = 0; i < job->count; i++)
		put_mount(ds, job->images[i].mount);
	registry_remove_job(&ds->registry, job);
}

/* Mounts (or shares) one image for a job. On failure err holds the reason
 * for the user and nothing new is mounted. */
static enum result mount_one(struct daemon_state *ds, const struct identity *id,
			     const Squash__ImageSpec *spec, struct mount_entry **out,
			     char *err, size_t errlen)
{
	int fd;
	struct stat st;
	char why[SQUASH_PATH_MAX + 512];
	enum result res = image_open_as_user(spec->image, id, timeout_ms(ds), &fd, &st, why, sizeof(why));
	if (res != RESULT_OK) {
		snprintf(err, errlen, "%s", why);
		return res;
	}
	Squash__MountMode mode = policy_mount_mode(ds->cfg, fd, &st);
	if (mode == SQUASH__MOUNT_MODE__FUSE && id->uid == 0) {
		/* FUSE servers parse untrusted images; they never run as root. */
		snprintf(err, errlen, "image %s: jobs of root may only use trusted images "
			 "(its FUSE server would run as root)", spec->image);
		close(fd);
		return RESULT_USER_ERROR;
	}
	enum squash_reader reader = mode == SQUASH__MOUNT_MODE__KERNEL ? SQUASH_READER_KERNEL
									: SQUASH_READER_FUSE;
	if (squash_superblock_check_fd(fd, reader, NULL, why, sizeof(why)) < 0) {
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
	struct mount_entry *m = registry_find_mount(&ds->registry, &key);
	if (m) {
		close(fd);
		*out = m;
		return RESULT_OK;
	}

	char mount_point[PATH_MAX];
	if (snprintf(mount_point, sizeof(mount_point), "%s/m%u", ds->mount_dir,
		     ds->registry.next_mount_id + 1) >= (int)sizeof(mount_point)) {
		snprintf(err, errlen, "mount directory path too long");
		close(fd);
		return RESULT_NODE_ERROR;
	}
	if (mkdir(mount_point, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create mount point %s: %s", mount_point, strerror(errno));
		close(fd);
		return RESULT_NODE_ERROR;
	}
	pid_t server = 0;
	char loop_dev[32] = "";
	if (mode == SQUASH__MOUNT_MODE__FUSE)
		res = fuse_mount_image(fd, mount_point, id, ds->cfg->squashfuse, timeout_ms(ds),
				       &server, why, sizeof(why));
	else
		res = loop_mount_image(fd, mount_point, loop_dev, sizeof(loop_dev), why, sizeof(why));
	close(fd);
	if (res != RESULT_OK) {
		rmdir(mount_point);
		snprintf(err, errlen, "image %s: %s", spec->image, why);
		return res;
	}
	m = registry_add_mount(&ds->registry, &key, spec->image, mount_point);
	if (!m) {
		unmount_image(mount_point, server, timeout_ms(ds), why, sizeof(why));
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	m->server_pid = server;
	snprintf(m->loop_device, sizeof(m->loop_device), "%s", loop_dev);
	log_info("mounted image %s at %s (%s%s%s, uid %u)", spec->image, mount_point,
		 mode == SQUASH__MOUNT_MODE__FUSE ? "fuse" : "kernel",
		 loop_dev[0] ? " on " : "", loop_dev, (unsigned)id->uid);
	*out = m;
	return RESULT_OK;
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
		out->resp.job_mounts[out->resp.n_job_mounts++] = jm;
	}
}

static bool same_request(const struct job_entry *job, const Squash__MountJobRequest *req)
{
	if (job->uid != req->uid || job->count != req->n_images || job->status != SQUASH__STATUS__OK)
		return false;
	for (size_t i = 0; i < job->count; i++)
		if (strcmp(job->images[i].image, req->images[i]->image) ||
		    strcmp(job->images[i].target, req->images[i]->target))
			return false;
	return true;
}

void job_mounts_mount(struct daemon_state *ds, const Squash__MountJobRequest *req, struct reply *out)
{
	struct job_entry *job = registry_find_job(&ds->registry, req->job_id);
	if (job && same_request(job, req)) {
		/* A repeated prolog (slurmd retry): same answer, no new references. */
		reply_job_mounts(out, job);
		return;
	}
	if (job) {
		/* A requeued job reusing its id: start from nothing. */
		log_info("job %u: replacing earlier mounts of this job id", req->job_id);
		drop_job(ds, job);
	}
	job = registry_add_job(&ds->registry, req->job_id, req->uid);
	if (!job) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}

	char err[SQUASH_PATH_MAX + 1024];
	enum result res = policy_check_mount_request(ds->cfg, req, err, sizeof(err));
	struct identity *id = NULL;
	if (res == RESULT_OK) {
		id = malloc(sizeof(*id));
		res = id ? identity_lookup(req->uid, id, err, sizeof(err)) : RESULT_NODE_ERROR;
		if (!id)
			snprintf(err, sizeof(err), "out of memory");
	}
	for (size_t i = 0; res == RESULT_OK && i < req->n_images; i++) {
		struct mount_entry *m = NULL;
		res = mount_one(ds, id, req->images[i], &m, err, sizeof(err));
		if (res == RESULT_OK && registry_job_add_image(job, req->images[i]->image,
							       req->images[i]->target, m) < 0) {
			if (m->refcount == 0) { /* new and unreferenced: undo it */
				m->refcount = 1;
				put_mount(ds, m);
			}
			snprintf(err, sizeof(err), "out of memory");
			res = RESULT_NODE_ERROR;
		}
	}
	free(id);

	if (res == RESULT_OK) {
		log_info("job %u: %zu image(s) ready for uid %u", req->job_id, job->count, (unsigned)req->uid);
		reply_job_mounts(out, job);
	} else {
		/* Keep the job, failed and without mounts, so its steps can tell
		 * the user why; the epilog's release removes it. */
		for (size_t i = 0; i < job->count; i++) {
			put_mount(ds, job->images[i].mount);
			job->images[i].mount = NULL;
		}
		if (res == RESULT_NODE_ERROR)
			log_error("job %u (uid %u): %s", req->job_id, (unsigned)req->uid, err);
		else
			log_info("job %u (uid %u) refused: %s", req->job_id, (unsigned)req->uid, err);
		registry_job_set_failure(job, status_of(res), err);
		reply_error(out, status_of(res), "%s", err);
	}
	job_mounts_save(ds);
}

void job_mounts_release(struct daemon_state *ds, uint32_t job_id, struct reply *out)
{
	struct job_entry *job = registry_find_job(&ds->registry, job_id);
	if (!job) {
		reply_error(out, SQUASH__STATUS__OK, "job %u has no mounts on this node", job_id);
		return;
	}
	drop_job(ds, job);
	log_info("job %u released", job_id);
	job_mounts_save(ds);
}

void job_mounts_step_info(struct daemon_state *ds, const struct peer *peer, uint32_t job_id,
			  struct reply *out)
{
	struct job_entry *job = registry_find_job(&ds->registry, job_id);
	if (job && peer->uid != 0 && peer->uid != job->uid)
		job = NULL; /* other users' jobs do not exist for this peer */
	if (!job) {
		reply_error(out, SQUASH__STATUS__NOT_FOUND,
			    "squashd on this node has no images for job %u (did the job prolog run? "
			    "slurm.conf needs PrologFlags=Alloc)", job_id);
		return;
	}
	if (job->status != SQUASH__STATUS__OK) {
		reply_error(out, job->status, "%s", job->message ? job->message : "mount failed");
		return;
	}
	for (size_t i = 0; i < job->count; i++) {
		const struct mount_entry *m = job->images[i].mount;
		if (m->key.mode == SQUASH__MOUNT_MODE__FUSE && m->server_pid == 0) {
			reply_error(out, SQUASH__STATUS__NODE_ERROR,
				    "the FUSE server of image %s has died on this node", m->image);
			return;
		}
	}
	reply_job_mounts(out, job);
	out->resp.base_dir = (char *)ds->cfg->base_dir;
	out->resp.has_job_uid = true;
	out->resp.job_uid = job->uid;
}

static Squash__MountInfo *describe_mount(struct daemon_state *ds, const struct peer *peer,
					 const struct mount_entry *m)
{
	Squash__MountInfo *mi = malloc(sizeof(*mi));
	if (!mi)
		return NULL;
	squash__mount_info__init(mi);
	mi->image = m->image;
	mi->mode = m->key.mode;
	mi->mount_point = m->mount_point;
	mi->refcount = m->refcount;
	mi->job_ids = calloc(m->refcount + 1, sizeof(*mi->job_ids));
	if (!mi->job_ids) {
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
	if (m->loop_device[0])
		mi->loop_device = (char *)m->loop_device;
	return mi;
}

void job_mounts_list(struct daemon_state *ds, const struct peer *peer, struct reply *out)
{
	size_t n = 0;
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		n++;
	out->resp.mounts = calloc(n ? n : 1, sizeof(*out->resp.mounts));
	if (!out->resp.mounts) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next) {
		bool visible = peer->uid == 0;
		for (const struct job_entry *j = ds->registry.jobs; j && !visible; j = j->next)
			visible = j->uid == peer->uid && registry_job_uses(j, m);
		if (!visible)
			continue;
		Squash__MountInfo *mi = describe_mount(ds, peer, m);
		if (!mi) {
			reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
			return;
		}
		out->resp.mounts[out->resp.n_mounts++] = mi;
	}
}

void job_mounts_child_exited(struct daemon_state *ds, pid_t pid, int wait_status)
{
	struct mount_entry *m = registry_mount_by_server(&ds->registry, pid);
	if (!m)
		return;
	if (WIFSIGNALED(wait_status))
		log_error("FUSE server of image %s (pid %d) was killed by signal %d; its mount %s is dead",
			  m->image, (int)pid, WTERMSIG(wait_status), m->mount_point);
	else
		log_error("FUSE server of image %s (pid %d) exited with status %d; its mount %s is dead",
			  m->image, (int)pid, WEXITSTATUS(wait_status), m->mount_point);
	m->server_pid = 0;
	job_mounts_save(ds);
}

static bool known_mount_point(struct daemon_state *ds, const char *path)
{
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		if (!strcmp(m->mount_point, path))
			return true;
	return false;
}

void job_mounts_adopt(struct daemon_state *ds)
{
	char err[PATH_MAX + 256];
	struct mount_entry *next;
	for (struct mount_entry *m = ds->registry.mounts; m; m = next) {
		next = m->next;
		if (is_mount_point(m->mount_point) > 0) {
			if (m->server_pid > 0 && kill(m->server_pid, 0) < 0)
				m->server_pid = 0;
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
		rmdir(m->mount_point);
		registry_remove_mount(&ds->registry, m);
	}
	/* Recount references from the jobs (the file stores none). */
	for (struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		m->refcount = 0;
	for (struct job_entry *j = ds->registry.jobs; j; j = j->next)
		for (size_t i = 0; i < j->count; i++)
			if (j->images[i].mount)
				j->images[i].mount->refcount++;

	DIR *dir = opendir(ds->mount_dir);
	if (!dir)
		return;
	for (struct dirent *de; (de = readdir(dir));) {
		if (de->d_name[0] == '.')
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", ds->mount_dir, de->d_name) >= (int)sizeof(path) ||
		    known_mount_point(ds, path))
			continue;
		log_warning("cleaning up unknown leftover %s", path);
		if (unmount_image(path, 0, timeout_ms(ds), err, sizeof(err)) != RESULT_OK)
			log_error("cannot clean up %s: %s", path, err);
	}
	closedir(dir);
	/* Mounts no job holds any more (released while squashd was down). */
	for (struct mount_entry *m = ds->registry.mounts; m; m = next) {
		next = m->next;
		if (m->refcount == 0) {
			m->refcount = 1;
			put_mount(ds, m);
		}
	}
	job_mounts_save(ds);
}

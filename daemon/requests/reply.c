#include "config.h"
#include "requests/reply.h"

#include "core/merge.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void reply_mount_info_free(Squash__MountInfo *mi)
{
	free(mi->job_ids);
	free(mi->image);
	free(mi->mount_point);
	free(mi->loop_device);
	for (size_t i = 0; i < mi->n_steps; i++)
		free(mi->steps[i]);
	free(mi->steps);
	free(mi->session_pids);
	free(mi);
}

void reply_free(struct reply *r)
{
	for (size_t i = 0; i < r->resp.n_job_mounts; i++) {
		Squash__JobMount *jm = r->resp.job_mounts[i];
		free(jm->image);
		free(jm->target);
		free(jm->source);
		free(jm);
	}
	free(r->resp.job_mounts);
	for (size_t i = 0; i < r->resp.n_mounts; i++)
		reply_mount_info_free(r->resp.mounts[i]);
	free(r->resp.mounts);
	free(r->resp.released_job_ids);
	free(r->extra);
	r->extra = NULL;
	r->resp.job_mounts = NULL;
	r->resp.mounts = NULL;
	r->resp.released_job_ids = NULL;
	r->resp.n_job_mounts = r->resp.n_mounts = r->resp.n_released_job_ids = 0;
}

Squash__Status reply_status_of(enum result r)
{
	return r == RESULT_USER_ERROR ? SQUASH__STATUS__USER_ERROR : SQUASH__STATUS__NODE_ERROR;
}

int reply_add_mounts(struct reply *out, const struct job_entry *e)
{
	size_t n = out->resp.n_job_mounts;
	bool step = e->kind == HOLDER_STEP;
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
				    "the FUSE server of image %s on this node %s; %s", m->image,
				    m->failure ? m->failure : "died",
				    e->kind == HOLDER_JOB ? "the job's mount of it is gone (new jobs get a fresh one)"
							  : "its mount is gone");
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
		/* Copies: the answer is sent after the lock is let go, when the
		 * entry may be gone (a session whose process exited meanwhile,
		 * a job its epilog released). */
		jm->image = strdup(e->images[i].image);
		jm->target = strdup(e->images[i].target);
		jm->source = strdup(e->images[i].overlay ? e->images[i].overlay
							 : merge_source(e, i)->mount_point);
		jm->mode = e->images[i].mount->key.mode;
		if (e->images[i].overlay)
			jm->has_writable = jm->writable = true;
		if (step)
			jm->has_step = jm->step = true;
		out->resp.job_mounts[out->resp.n_job_mounts++] = jm;
		if (!jm->image || !jm->target || !jm->source) {
			reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
			return -1;
		}
	}
	return 0;
}

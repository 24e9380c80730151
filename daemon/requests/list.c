/* list (anyone; non-root peers see only their own): the node-level mounts
 * with their holders (jobs, steps, sessions), state and reader; trailing
 * mounts are dropped (truncated) when the answer would not fit a frame. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core/holder_index.h"
#include "core/sharing.h"
#include "frame.h"
#include "mount/fuse_reader.h"
#include "registry/linger.h"
#include "requests/requests.h"

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

/* Whether holder e's user may see it. */
static bool visible_to(const struct peer *peer, const struct job_entry *e)
{
	return peer->uid == 0 || peer->uid == e->uid;
}

/* A mount's holders (holder_index.h). */
struct held_by {
	const struct job_entry *const *e;
	size_t n;
};

/* The steps and sessions holding the mount, as peer may see them. */
static void describe_scoped(const struct peer *peer, struct held_by h, Squash__MountInfo *mi)
{
	size_t n = 0;

	for (size_t i = 0; i < h.n; i++)
		n += h.e[i]->kind != HOLDER_JOB && visible_to(peer, h.e[i]);
	if (!n)
		return;
	mi->steps = calloc(n, sizeof(*mi->steps));
	mi->session_pids = calloc(n, sizeof(*mi->session_pids));
	if (!mi->steps || !mi->session_pids)
		return; /* the answer just lacks them */
	for (size_t i = 0; i < h.n; i++) {
		const struct job_entry *e = h.e[i];

		if (e->kind == HOLDER_JOB || !visible_to(peer, e))
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

/* A copy of m for the answer: the registry may change once unlocked. */
static Squash__MountInfo *describe_mount(struct daemon_state *ds, const struct peer *peer,
					 const struct mount_entry *m, struct held_by h)
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
			      : m->key.mode == MOUNT_MODE_MERGED ? "overlayfs of the images' mounts"
			      : ds->fuse_reader ? ds->fuse_reader : "squashfuse_ll");
	mi->job_ids = calloc(m->refcount + 1, sizeof(*mi->job_ids));
	mi->loop_device = m->loop_device[0] ? strdup(m->loop_device) : NULL;
	if (!mi->image || !mi->mount_point || !mi->job_ids || (m->loop_device[0] && !mi->loop_device)) {
		reply_mount_info_free(mi);
		return NULL;
	}
	for (size_t i = 0; i < h.n; i++)
		if (h.e[i]->kind == HOLDER_JOB && visible_to(peer, h.e[i]) && mi->n_job_ids <= m->refcount)
			mi->job_ids[mi->n_job_ids++] = h.e[i]->job_id;
	if (m->key.owner_uid != MOUNT_OWNER_ANY) {
		mi->has_owner_uid = true;
		mi->owner_uid = m->key.owner_uid;
	}
	if (m->server_pid > 0) {
		mi->has_server_pid = true;
		mi->server_pid = m->server_pid;
	}
	describe_scoped(peer, h, mi);
	if (m->state == MOUNT_LINGERING) {
		mi->has_linger_left_s = true;
		mi->linger_left_s = linger_left_s(m, squash_now_ms());
	}
	return mi;
}

/* Whether a non-root peer may see m: it holds it (as a job, step or
 * session), or it is the user's own lingering FUSE mount. */
static bool peer_sees(const struct peer *peer, const struct mount_entry *m, struct held_by h)
{
	if (peer->uid == 0 || (m->state == MOUNT_LINGERING && m->key.owner_uid == peer->uid))
		return true;
	for (size_t i = 0; i < h.n; i++)
		if (h.e[i]->uid == peer->uid)
			return true;
	return false;
}

/* Drops trailing mounts until the answer fits one frame. Each mount's
 * share of the answer is measured once: measuring the whole answer again
 * after each mount dropped was quadratic in the mounts, CPU any user
 * could ask for with long paths. */
static void fit_frame(struct reply *out)
{
	const size_t limit = SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE;
	Squash__MountInfo **all = out->resp.mounts;
	size_t n = out->resp.n_mounts, keep, total;

	if (squash__response__get_packed_size(&out->resp) <= limit)
		return;
	out->resp.has_truncated = out->resp.truncated = true;
	out->resp.n_mounts = 0;
	size_t base = squash__response__get_packed_size(&out->resp);
	out->resp.n_mounts = 1;
	for (keep = 0, total = base; keep < n; keep++) {
		out->resp.mounts = &all[keep];
		size_t one = squash__response__get_packed_size(&out->resp) - base;
		if (total + one > limit)
			break;
		total += one;
	}
	out->resp.mounts = all;
	out->resp.n_mounts = keep;
	for (size_t i = keep; i < n; i++)
		reply_mount_info_free(all[i]);
}

void request_list(struct request *rq)
{
	struct daemon_state *ds = rq->ds;
	struct reply *out = rq->out;

	struct holder_index idx;

	pthread_mutex_lock(&ds->lock);
	size_t n = 0;
	for (const struct mount_entry *m = sharing_next_mount_locked(ds, NULL); m;
	     m = sharing_next_mount_locked(ds, m))
		n++;
	out->resp.mounts = calloc(n ? n : 1, sizeof(*out->resp.mounts));
	if (!out->resp.mounts || holder_index_build_locked(ds, &idx) < 0) {
		pthread_mutex_unlock(&ds->lock);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	for (const struct mount_entry *m = sharing_next_mount_locked(ds, NULL); m;
	     m = sharing_next_mount_locked(ds, m)) {
		struct held_by h;

		h.e = holder_index_of(&idx, m, &h.n);
		if (!peer_sees(rq->peer, m, h))
			continue;
		Squash__MountInfo *mi = describe_mount(ds, rq->peer, m, h);
		if (!mi) {
			pthread_mutex_unlock(&ds->lock);
			holder_index_free(&idx);
			reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
			return;
		}
		out->resp.mounts[out->resp.n_mounts++] = mi;
	}
	pthread_mutex_unlock(&ds->lock);
	holder_index_free(&idx);
	fit_frame(out);
}

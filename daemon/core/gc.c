#include "config.h"
#include "core/gc.h"
#include "core/gc_window.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "core/holders.h"
#include "core/owner_teardown.h"
#include "core/sharing.h"
#include "mount/mount_users.h"
#include "slurm/local_steps.h"
#include "slurm/slurm_ask.h"
#include "util/log.h"
#include "util/mountinfo_kept.h"

#define QUERY_TIMEOUT_MS 60000
/* squashctl health's dry run must answer well within NHC's 10 s. */
#define DRY_RUN_TIMEOUT_MS 5000

static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER; /* one pass at a time */
static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t timer_cond;
static bool timer_stop;

/* The other namespaces' mountinfo read for one user's jobs in one pass
 * (or health's dry run): a user who makes many namespaces with many
 * mounts makes gc keep their own lost jobs, never slows it for others. */
#define MOUNTINFO_BUDGET_PER_USER (32u << 20)

/* What processes outside squashd's namespace use of the verdicts' mounts:
 * one query per mount a gone job (or step) holds alone, asked of /proc
 * in one walk for all of them. */
struct verdict_uses {
	struct mount_use_query *q;
	char (*points)[PATH_MAX];
	size_t *verdict; /* the verdict each query is for */
	size_t n, cap;
};

static bool uses_add(struct verdict_uses *u, size_t verdict, uid_t uid, const char *point)
{
	if (u->n == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 64;
		struct mount_use_query *q = realloc(u->q, cap * sizeof(*q));
		if (q)
			u->q = q;
		char (*points)[PATH_MAX] = q ? realloc(u->points, cap * sizeof(*points)) : NULL;
		if (points)
			u->points = points;
		size_t *v = points ? realloc(u->verdict, cap * sizeof(*v)) : NULL;
		if (!v)
			return false;
		u->verdict = v;
		u->cap = cap;
	}
	snprintf(u->points[u->n], PATH_MAX, "%s", point);
	u->q[u->n] = (struct mount_use_query){ .uid = uid };
	u->verdict[u->n++] = verdict;
	return true;
}

/* The mounts of holder e that it holds alone (lock held). */
static bool uses_add_holder(struct verdict_uses *u, size_t verdict, const struct job_entry *e)
{
	bool ok = true;

	for (size_t i = 0; ok && i < e->count; i++) {
		const struct mount_entry *m = e->images[i].mount;
		if (m && m->refcount == 1 && m->state == MOUNT_READY)
			ok = uses_add(u, verdict, e->uid, m->mount_point);
		/* A step binds a writable image's overlay, not the image's mount. */
		if (ok && e->images[i].overlay)
			ok = uses_add(u, verdict, e->uid, e->images[i].overlay);
		/* ... and a merge group's merged mount (held once per image),
		 * looked at once, at the group's first image. */
		const struct mount_entry *g = e->images[i].merged;
		size_t held = 0, first = i;
		for (size_t k = 0; g && k < e->count; k++)
			if (e->images[k].merged == g && (held++ == 0))
				first = k;
		if (ok && g && first == i && g->refcount == held && g->state == MOUNT_READY)
			ok = uses_add(u, verdict, e->uid, g->mount_point);
	}
	return ok;
}

/* Asks about every verdict but "here" (lock not held; reads the registry
 * under it). Out of memory: the verdicts not asked about count as used. */
static void uses_ask(struct daemon_state *ds, const struct slurm_verdict *v, size_t n,
		     const char *mountinfo, struct verdict_uses *u)
{
	memset(u, 0, sizeof(*u));
	if (!mountinfo)
		return;
	pthread_mutex_lock(&ds->lock);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i].state, "here"))
			continue;
		const struct job_entry *e = v[i].step_id == SLURM_NO_STEP
			? registry_find_job(&ds->registry, v[i].job_id)
			: registry_find_step(&ds->registry, v[i].job_id, v[i].step_id);
		if (e && !uses_add_holder(u, i, e)) {
			u->n = SIZE_MAX; /* not known */
			break;
		}
	}
	pthread_mutex_unlock(&ds->lock);
	if (u->n == SIZE_MAX)
		return;
	for (size_t k = 0; k < u->n; k++) {
		mount_users_identity(mountinfo, u->points[k], &u->q[k].id);
		u->q[k].point = u->points[k];
	}
	mount_users_find_all(u->q, u->n, MOUNTINFO_BUDGET_PER_USER);
}

/* A pid that uses a mount verdict i holds alone, 0 none, -1 not known. */
static pid_t uses_user(const struct verdict_uses *u, size_t i)
{
	if (u->n == SIZE_MAX)
		return -1;
	for (size_t k = 0; k < u->n; k++)
		if (u->verdict[k] == i && u->q[k].user != 0)
			return u->q[k].user;
	return 0;
}

static void uses_free(struct verdict_uses *u)
{
	free(u->q);
	free(u->points);
	free(u->verdict);
}

/* Releases what one verdict says is gone. Returns true when a job was.
 * The unmounting may wait on a user's stopped reader: without collect
 * (the periodic pass, every user's) it goes to the job's owner's thread
 * (core/owner_teardown.h); squashctl gc collects it and tears it down
 * after the pass, off pass_lock, and answers once it is done. */
static bool release_gone(struct daemon_state *ds, const struct squashd_config *cfg,
			 const struct slurm_verdict *v, pid_t user, struct teardown *collect)
{
	struct teardown own = TEARDOWN_INIT(cfg);
	struct teardown *td = collect ? collect : &own;
	bool released;

	if (user < 0) {
		char what[64];
		if (v->step_id != SLURM_NO_STEP)
			snprintf(what, sizeof(what), "step %u.%u", v->job_id, v->step_id);
		else
			snprintf(what, sizeof(what), "job %u", v->job_id);
		log_info("gc: %s is %s in Slurm, but the mount namespaces that could use it were not all "
			 "read (its user's past %u MiB in this pass, one past 64 MiB, or out of memory); "
			 "keeping it", what, v->state, MOUNTINFO_BUDGET_PER_USER >> 20);
		return false;
	}
	if (user) {
		if (v->step_id != SLURM_NO_STEP)
			log_info("gc: step %u.%u is %s in Slurm, but pid %d still uses its mount; keeping it",
				 v->job_id, v->step_id, v->state, (int)user);
		else
			log_info("gc: job %u is %s in Slurm, but pid %d still uses its mount; keeping it",
				 v->job_id, v->state, (int)user);
		return false;
	}
	pthread_mutex_lock(&ds->lock);
	const struct job_entry *held = v->step_id == SLURM_NO_STEP
		? registry_find_job(&ds->registry, v->job_id)
		: registry_find_step(&ds->registry, v->job_id, v->step_id);
	uid_t owner = held ? held->uid : 0;
	if (v->step_id != SLURM_NO_STEP)
		released = holders_release_step_locked(ds, v->job_id, v->step_id, td) == HOLDER_RELEASED;
	else
		released = holders_release_job_locked(ds, v->job_id, td) == HOLDER_RELEASED;
	ds->gc_releases += released;
	pthread_mutex_unlock(&ds->lock);
	if (released && v->step_id != SLURM_NO_STEP) {
		log_info("gc: released step %u.%u (Slurm: %s; its slurmstepd did not release it)",
			 v->job_id, v->step_id, v->state);
	} else if (released) {
		log_context_job(v->job_id, -1);
		log_info("gc: released job %u (Slurm: %s; its epilog did not release it)", v->job_id,
			 v->state);
		log_context_clear();
	}
	if (!collect)
		owner_teardown(ds, &own, owner);
	return released && v->step_id == SLURM_NO_STEP;
}

/* Drops from ids/steps (steps may be NULL: jobs only) the records that a
 * slurmstepd on this node vouches for: they run here, and slurmctld is not
 * asked about them, so a node whose jobs run sends it nothing. Returns how
 * many are left to ask about; all of them when /proc cannot be read. */
static size_t drop_running_here(uint32_t *ids, uint32_t *steps, size_t n)
{
	struct local_steps here;
	size_t kept = 0;

	if (n == 0 || local_steps_scan("/proc", local_steps_this_node(), &here) != 0)
		return n;
	for (size_t i = 0; i < n; i++) {
		bool running = steps && steps[i] != SLURM_NO_STEP
				       ? local_steps_has_step(&here, ids[i], steps[i])
				       : local_steps_has_job(&here, ids[i]);
		if (running)
			continue;
		ids[kept] = ids[i];
		if (steps)
			steps[kept] = steps[i];
		kept++;
	}
	local_steps_free(&here);
	return kept;
}

/* Where the next pass's questions start (pass_lock held; gc_window.h). */
static size_t pass_cursor;

/* The settled jobs (and, with steps, the steps with images of their own)
 * in the registry, less those that run here (both the pass and health's
 * dry run ask only about the others): at most GC_BATCH of them, from
 * *cursor on (NULL: from the first). */
static size_t questions(struct daemon_state *ds, uint32_t *ids, uint32_t *steps, size_t *cursor)
{
	size_t n = 0, total = 0;

	pthread_mutex_lock(&ds->lock);
	for (const struct job_entry *j = ds->registry.jobs; j; j = j->next)
		total += !j->pending;
	for (const struct job_entry *e = ds->registry.scoped; steps && e; e = e->next)
		total += e->kind == HOLDER_STEP && !e->pending;
	uint32_t *all_ids = malloc((total ? total : 1) * sizeof(*all_ids));
	uint32_t *all_steps = malloc((total ? total : 1) * sizeof(*all_steps));
	for (const struct job_entry *j = ds->registry.jobs; all_ids && all_steps && j; j = j->next)
		if (!j->pending) {
			all_steps[n] = SLURM_NO_STEP;
			all_ids[n++] = j->job_id;
		}
	/* Steps with images of their own: a step killed so hard that its
	 * slurmstepd never released them. */
	for (const struct job_entry *e = ds->registry.scoped; all_ids && all_steps && steps && e; e = e->next)
		if (e->kind == HOLDER_STEP && !e->pending) {
			all_steps[n] = e->step_id;
			all_ids[n++] = e->job_id;
		}
	pthread_mutex_unlock(&ds->lock);
	/* Those that run here first, then the window: records that run here
	 * never take a place of the batch. */
	n = drop_running_here(all_ids, steps ? all_steps : NULL, n);
	size_t start = 0;
	n = gc_window(all_ids, all_steps, n, cursor ? cursor : &start, ids, steps, GC_BATCH);
	free(all_ids);
	free(all_steps);
	return n;
}

static int run_pass(struct daemon_state *ds, const struct squashd_config *cfg, uint32_t *released,
		    size_t cap, char *err, size_t errlen, struct teardown *collect)
{
	uint32_t *ids = malloc(GC_BATCH * sizeof(*ids)), *steps = malloc(GC_BATCH * sizeof(*steps));
	struct slurm_verdict *verdicts = malloc(GC_BATCH * sizeof(*verdicts));
	int count = 0;

	if (!ids || !steps || !verdicts) {
		snprintf(err, errlen, "out of memory");
		count = -1;
		goto out;
	}
	size_t n = questions(ds, ids, steps, &pass_cursor);
	int found = n ? slurm_ask(ds->node_name, cfg->slurm_conf, ids, steps, n, verdicts,
				  QUERY_TIMEOUT_MS, err, errlen) : 0;
	if (found < 0) {
		count = -1;
		goto out;
	}
	char *mountinfo = found ? mountinfo_kept("/proc/self/mountinfo", mountinfo_below, ds->mount_dir) : NULL;
	struct verdict_uses uses;
	uses_ask(ds, verdicts, (size_t)found, mountinfo, &uses);
	free(mountinfo);
	for (int i = 0; i < found; i++) {
		if (strcmp(verdicts[i].state, "here") &&
		    release_gone(ds, cfg, &verdicts[i], uses_user(&uses, (size_t)i), collect)) {
			if ((size_t)count < cap)
				released[count] = verdicts[i].job_id;
			count++;
		}
	}
	uses_free(&uses);
	pthread_mutex_lock(&ds->lock);
	ds->last_gc_ms = squash_now_ms();
	pthread_mutex_unlock(&ds->lock);
out:
	free(ids);
	free(steps);
	free(verdicts);
	return count;
}

int gc_pass(struct daemon_state *ds, const struct squashd_config *cfg, uint32_t *released,
	    size_t cap, char *err, size_t errlen)
{
	struct teardown td = TEARDOWN_INIT(cfg);

	pthread_mutex_lock(&pass_lock);
	int n = run_pass(ds, cfg, released, cap, err, errlen, &td);
	pthread_mutex_unlock(&pass_lock);
	/* Off pass_lock: the periodic pass never waits behind a user's
	 * stopped reader that this request waits for. */
	sharing_teardown(ds, &td);
	return n;
}

void gc_dry_run(struct daemon_state *ds, const struct squashd_config *cfg,
		void (*say)(void *arg, const char *line, bool note), void *arg)
{
	uint32_t *ids = malloc(GC_BATCH * sizeof(*ids));
	struct slurm_verdict *verdicts = malloc(GC_BATCH * sizeof(*verdicts));
	char err[512], line[256];

	if (!ids || !verdicts)
		goto out;
	size_t n = questions(ds, ids, NULL, NULL);
	int found = n ? slurm_ask(ds->node_name, cfg->slurm_conf, ids, NULL, n, verdicts,
				  DRY_RUN_TIMEOUT_MS, err, sizeof(err)) : 0;
	if (found < 0) {
		log_info("health: cannot ask Slurm which jobs still run here: %s", err);
		goto out;
	}
	char *mountinfo = found ? mountinfo_kept("/proc/self/mountinfo", mountinfo_below, ds->mount_dir) : NULL;
	struct verdict_uses uses;
	uses_ask(ds, verdicts, (size_t)found, mountinfo, &uses);
	free(mountinfo);
	for (int i = 0; i < found; i++) {
		if (!strcmp(verdicts[i].state, "here"))
			continue;
		pid_t user = uses_user(&uses, (size_t)i);
		if (user < 0)
			snprintf(line, sizeof(line), "mount of job %u that no longer runs here (Slurm: %s); "
				 "its user's mount namespaces are past what gc reads, so gc keeps it",
				 verdicts[i].job_id, verdicts[i].state);
		else if (user)
			snprintf(line, sizeof(line), "mount of job %u that no longer runs here (Slurm: %s); "
				 "pid %d still uses it, so gc keeps it", verdicts[i].job_id, verdicts[i].state,
				 (int)user);
		else
			snprintf(line, sizeof(line), "mount of job %u that no longer runs here (Slurm: %s); "
				 "the next gc releases it", verdicts[i].job_id, verdicts[i].state);
		say(arg, line, user != 0);
	}
	uses_free(&uses);
out:
	free(ids);
	free(verdicts);
}

static void *timer_loop(void *arg)
{
	struct daemon_state *ds = arg;
	char err[512];

	pthread_mutex_lock(&timer_lock);
	while (!timer_stop) {
		pthread_mutex_unlock(&timer_lock);
		const struct squashd_config *cfg = settings_hold();
		unsigned interval = cfg->gc_interval_s;
		pthread_mutex_lock(&pass_lock);
		int n = run_pass(ds, cfg, NULL, 0, err, sizeof(err), NULL);
		pthread_mutex_unlock(&pass_lock);
		if (ds->roots_deferred)
			daemon_make_roots_private(ds);
		if (n < 0)
			log_warning("gc: %s; trying again in %u s", err, interval);
		settings_drop(cfg);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += interval;
		pthread_mutex_lock(&timer_lock);
		while (!timer_stop && pthread_cond_timedwait(&timer_cond, &timer_lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&timer_lock);
	return NULL;
}

int gc_start(struct daemon_state *ds, const struct squashd_config *cfg)
{
	pthread_condattr_t attr;
	pthread_attr_t tattr;
	pthread_t t;

	if (cfg->gc_interval_s == 0)
		return 0;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&timer_cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_attr_init(&tattr);
	pthread_attr_setdetachstate(&tattr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &tattr, timer_loop, ds);
	pthread_attr_destroy(&tattr);
	return rc == 0 ? 0 : -1;
}

void gc_stop(void)
{
	pthread_mutex_lock(&timer_lock);
	timer_stop = true;
	pthread_cond_broadcast(&timer_cond);
	pthread_mutex_unlock(&timer_lock);
}

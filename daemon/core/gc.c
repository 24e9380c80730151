#include "config.h"
#include "core/gc.h"

#include <errno.h>
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

#define QUERY_TIMEOUT_MS 60000
/* squashctl health's dry run must answer well within NHC's 10 s. */
#define DRY_RUN_TIMEOUT_MS 5000
#define MOUNTINFO_MAX (4 << 20)

static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER; /* one pass at a time */
static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t timer_cond;
static bool timer_stop;

/* A live process that still uses a mount that job_id (or its step
 * step_id) holds alone (lock not held; reads the registry under it). */
static pid_t still_used(struct daemon_state *ds, uint32_t job_id, uint32_t step_id,
			const char *mountinfo)
{
	char (*points)[PATH_MAX] = NULL;
	size_t n = 0;
	pid_t pid = 0;

	if (!mountinfo)
		return 0;
	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = step_id == SLURM_NO_STEP ? registry_find_job(&ds->registry, job_id)
						   : registry_find_step(&ds->registry, job_id, step_id);
	if (job)
		points = calloc(2 * job->count + 1, PATH_MAX);
	for (size_t i = 0; points && i < job->count; i++) {
		const struct mount_entry *m = job->images[i].mount;
		if (m && m->refcount == 1 && m->state == MOUNT_READY)
			snprintf(points[n++], PATH_MAX, "%s", m->mount_point);
		/* A step binds a writable image's overlay, not the image's mount. */
		if (job->images[i].overlay)
			snprintf(points[n++], PATH_MAX, "%s", job->images[i].overlay);
		/* ... and a merge group's merged mount (held once per image),
		 * looked at once, at the group's first image. */
		const struct mount_entry *g = job->images[i].merged;
		size_t held = 0, first = i;
		for (size_t k = 0; g && k < job->count; k++)
			if (job->images[k].merged == g && (held++ == 0))
				first = k;
		if (g && first == i && g->refcount == held && g->state == MOUNT_READY)
			snprintf(points[n++], PATH_MAX, "%s", g->mount_point);
	}
	pthread_mutex_unlock(&ds->lock);
	for (size_t i = 0; i < n && !pid; i++) {
		struct mount_identity id;
		mount_users_identity(mountinfo, points[i], &id);
		pid = id.dev[0] ? mount_users_find(&id) : 0;
	}
	free(points);
	return pid;
}

/* Releases what one verdict says is gone. Returns true when a job was.
 * The unmounting may wait on a user's stopped reader: without collect
 * (the periodic pass, every user's) it goes to the job's owner's thread
 * (core/owner_teardown.h); squashctl gc collects it and tears it down
 * after the pass, off pass_lock, and answers once it is done. */
static bool release_gone(struct daemon_state *ds, const struct squashd_config *cfg,
			 const struct slurm_verdict *v, const char *mountinfo, struct teardown *collect)
{
	pid_t user = still_used(ds, v->job_id, v->step_id, mountinfo);
	struct teardown own = TEARDOWN_INIT(cfg);
	struct teardown *td = collect ? collect : &own;
	bool released;

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

/* The settled jobs (and, with steps, the steps with images of their own)
 * in the registry, at most GC_BATCH, less those that run here (both the
 * pass and health's dry run ask only about the others). */
static size_t questions(struct daemon_state *ds, uint32_t *ids, uint32_t *steps)
{
	size_t n = 0;

	pthread_mutex_lock(&ds->lock);
	for (const struct job_entry *j = ds->registry.jobs; j && n < GC_BATCH; j = j->next)
		if (!j->pending) {
			if (steps)
				steps[n] = SLURM_NO_STEP;
			ids[n++] = j->job_id;
		}
	/* Steps with images of their own: a step killed so hard that its
	 * slurmstepd never released them. */
	for (const struct job_entry *e = ds->registry.scoped; steps && e && n < GC_BATCH; e = e->next)
		if (e->kind == HOLDER_STEP && !e->pending) {
			steps[n] = e->step_id;
			ids[n++] = e->job_id;
		}
	pthread_mutex_unlock(&ds->lock);
	return drop_running_here(ids, steps, n);
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
	size_t n = questions(ds, ids, steps);
	int found = n ? slurm_ask(ds->node_name, cfg->slurm_conf, ids, steps, n, verdicts,
				  QUERY_TIMEOUT_MS, err, errlen) : 0;
	if (found < 0) {
		count = -1;
		goto out;
	}
	char *mountinfo = found ? mount_users_read_file("/proc/self/mountinfo", MOUNTINFO_MAX) : NULL;
	for (int i = 0; i < found; i++) {
		if (strcmp(verdicts[i].state, "here") && release_gone(ds, cfg, &verdicts[i], mountinfo, collect)) {
			if ((size_t)count < cap)
				released[count] = verdicts[i].job_id;
			count++;
		}
	}
	free(mountinfo);
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
		void (*problem)(void *arg, const char *line), void *arg)
{
	uint32_t *ids = malloc(GC_BATCH * sizeof(*ids));
	struct slurm_verdict *verdicts = malloc(GC_BATCH * sizeof(*verdicts));
	char err[512], line[256];

	if (!ids || !verdicts)
		goto out;
	size_t n = questions(ds, ids, NULL);
	int found = n ? slurm_ask(ds->node_name, cfg->slurm_conf, ids, NULL, n, verdicts,
				  DRY_RUN_TIMEOUT_MS, err, sizeof(err)) : 0;
	if (found < 0) {
		log_info("health: cannot ask Slurm which jobs still run here: %s", err);
		goto out;
	}
	char *mountinfo = found ? mount_users_read_file("/proc/self/mountinfo", MOUNTINFO_MAX) : NULL;
	for (int i = 0; i < found; i++) {
		if (!strcmp(verdicts[i].state, "here"))
			continue;
		pid_t user = still_used(ds, verdicts[i].job_id, SLURM_NO_STEP, mountinfo);
		if (user)
			snprintf(line, sizeof(line), "mount of job %u that no longer runs here (Slurm: %s); "
				 "pid %d still uses it, so gc keeps it", verdicts[i].job_id, verdicts[i].state,
				 (int)user);
		else
			snprintf(line, sizeof(line), "mount of job %u that no longer runs here (Slurm: %s); "
				 "the next gc releases it", verdicts[i].job_id, verdicts[i].state);
		problem(arg, line);
	}
	free(mountinfo);
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

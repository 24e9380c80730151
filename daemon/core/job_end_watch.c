#include "config.h"
#include "core/job_end_watch.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "array_grow.h"
#include "core/holders.h"
#include "core/owner_teardown.h"
#include "core/sharing.h"
#include "process/child_process.h"
#include "process/process_watch.h"
#include "slurm/local_steps.h"
#include "util/log.h"

struct job_end {
	struct daemon_state *ds;
	uint32_t job_id;
	uid_t uid;
};

/* Whether pid is still a slurmstepd of job_id: checked after its pidfd is
 * open, so the pidfd cannot name a process that reused the pid. */
static bool is_stepd_of(pid_t pid, uint32_t job_id)
{
	char path[32], title[256];
	uint32_t job, step;
	ssize_t n = -1;
	int root = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC), dir = -1;

	snprintf(path, sizeof path, "%d", (int)pid);
	if (root >= 0)
		dir = openat(root, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir >= 0)
		n = local_steps_root_title(root, dir, title, sizeof title);
	if (dir >= 0)
		close(dir);
	if (root >= 0)
		close(root);
	return n > 0 && local_steps_parse_title(title, (size_t)n, &job, &step) && job == job_id;
}

static void stepd_exited(void *arg, pid_t pid, int status);

#define STEP_ENDED_MEANWHILE 2

/* Watches the slurmstepd of w's job that here found (its extern step when
 * extern_only). Returns 1 when watching (w is the watcher's), 0 when the
 * job has none in here, -1 when it could not watch, STEP_ENDED_MEANWHILE
 * when the step found is gone (look again). */
static int watch_found(struct job_end *w, const struct local_steps *here, bool extern_only)
{
	const struct local_step *step = local_steps_job_step(here, w->job_id);

	if (!step || (extern_only && step->step_id != LOCAL_STEP_EXTERN))
		return 0;
	int pidfd = child_pidfd(step->pid);

	if (pidfd < 0 || !is_stepd_of(step->pid, w->job_id)) {
		if (pidfd >= 0)
			close(pidfd);
		return STEP_ENDED_MEANWHILE;
	}
	return process_watch_add(pidfd, step->pid, w->uid, stepd_exited, w) == 0 ? 1 : -1;
}

/* Watches a slurmstepd of w's job on this node, as watch_found, looking at
 * /proc afresh. */
static int watch_next(struct job_end *w, bool extern_only)
{
	struct local_steps here;

	for (int tries = 0; tries < 3; tries++) {
		if (local_steps_scan("/proc", local_steps_this_node(), &here) != 0)
			return -1;
		int r = watch_found(w, &here, extern_only);

		local_steps_free(&here);
		if (r != STEP_ENDED_MEANWHILE)
			return r;
	}
	return -1;
}

/* The job's record if it is still the one w watches for (lock held). */
static struct job_entry *watched_job_locked(const struct job_end *w)
{
	struct job_entry *job = holders_find_job_locked(w->ds, w->job_id);

	return job && !job->pending && job->ends_with_extern && job->uid == w->uid ? job : NULL;
}

/* The job's last slurmstepd here is gone: release it, unless its record
 * is no longer the one watched (released, or mounted again); what goes
 * is added to td, for the caller to tear down. */
static void release(struct job_end *w, const char *how, struct teardown *td)
{
	struct daemon_state *ds = w->ds;

	pthread_mutex_lock(&ds->lock);
	if (watched_job_locked(w) &&
	    holders_release_job_locked(ds, w->job_id, td) == HOLDER_RELEASED)
		log_info("job %u released: %s, and no epilog released it (its first step had "
			 "mounted its images)", w->job_id, how);
	pthread_mutex_unlock(&ds->lock);
}

static void stepd_exited(void *arg, pid_t pid, int status)
{
	struct job_end *w = arg;
	int r;

	(void)pid;
	(void)status;
	/* The extern step is gone; steps still ending (KillWait) keep their
	 * images until they are gone too. */
	r = watch_next(w, false);
	if (r == 1)
		return;
	if (r < 0)
		log_error("job %u: cannot watch its steps on this node (%m); gc releases it", w->job_id);
	else {
		/* On the job's user's thread (process_watch.h). */
		const struct squashd_config *cfg = settings_hold();
		struct teardown td = TEARDOWN_INIT(cfg);
		release(w, "it has ended on this node (its extern step is gone)", &td);
		sharing_teardown(w->ds, &td);
		settings_drop(cfg);
	}
	free(w);
}

/* Marks the job (lock taken) so its release needs the mark, and a
 * restarted squashd knows to watch it; false when its record is gone. */
static bool mark(struct daemon_state *ds, uint32_t job_id, uid_t uid, bool on)
{
	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = holders_find_job_locked(ds, job_id);
	bool ours = job && !job->pending && job->uid == uid;

	if (ours && job->ends_with_extern != on) {
		job->ends_with_extern = on;
		daemon_save_locked(ds);
	}
	pthread_mutex_unlock(&ds->lock);
	return ours;
}

int job_end_watch(struct daemon_state *ds, uint32_t job_id, uid_t uid)
{
	struct job_end *w = malloc(sizeof(*w));
	int r = -1;

	if (!w) {
		log_error("job %u: cannot watch its extern step (out of memory); gc releases its "
			  "images after the job", job_id);
		return -1;
	}
	*w = (struct job_end){ ds, job_id, uid };
	/* Marked first: the extern step may end before the watch is set. */
	if (!mark(ds, job_id, uid, true)) {
		free(w);
		return -1;
	}
	r = watch_next(w, true);
	if (r == 1)
		return 0;
	mark(ds, job_id, uid, false);
	if (r == 0)
		log_info("job %u: no extern step on this node (PrologFlags=Contain is not set); "
			 "gc releases its images after the job", job_id);
	else
		log_error("job %u: cannot watch its extern step (%m); gc releases its images after "
			  "the job", job_id);
	free(w);
	return -1;
}

void job_end_watch_adopt(struct daemon_state *ds)
{
	struct job_end *marked = NULL;
	size_t n = 0, cap = 0;

	/* Collected first: releasing takes the lock the walk needs. */
	pthread_mutex_lock(&ds->lock);
	for (const struct job_entry *e = holders_next_locked(ds, NULL, NULL); e;
	     e = holders_next_locked(ds, e, NULL)) {
		if (e->kind != HOLDER_JOB || !e->ends_with_extern || e->pending)
			continue;
		if (array_reserve(&marked, &cap, n + 1, sizeof(*marked), 16) < 0)
			break; /* the rest is gc's */
		marked[n++] = (struct job_end){ ds, e->job_id, e->uid };
	}
	pthread_mutex_unlock(&ds->lock);

	/* One look at /proc for every marked job (a node may have hundreds
	 * after a restart); a job whose step ended meanwhile is looked up
	 * afresh. */
	struct local_steps here = { 0 };
	bool scanned = n > 0 && local_steps_scan("/proc", local_steps_this_node(), &here) == 0;

	/* Torn down on their owners' threads, as the rest of the adoption: a
	 * reader its user stopped must not hold up squashd's start. */
	const struct squashd_config *cfg = settings_hold();
	struct teardown td = TEARDOWN_INIT(cfg);
	for (size_t i = 0; i < n; i++) {
		struct job_end *w = malloc(sizeof(*w));
		int r = -1;

		if (w) {
			*w = marked[i];
			r = scanned ? watch_found(w, &here, false) : STEP_ENDED_MEANWHILE;
			if (r == STEP_ENDED_MEANWHILE)
				r = watch_next(w, false);
		}
		if (r == 1) {
			log_info("job %u: watching its steps on this node again, to release it when "
				 "they end", marked[i].job_id);
			continue;
		}
		if (r == 0)
			release(w, "it ended on this node while squashd was down", &td);
		else {
			log_error("job %u: cannot watch its steps on this node; gc releases it",
				  marked[i].job_id);
			mark(ds, marked[i].job_id, marked[i].uid, false);
		}
		free(w);
	}
	if (scanned)
		local_steps_free(&here);
	free(marked);
	owners_teardown(ds, &td);
	settings_drop(cfg);
}

#include "config.h"
#include "core/job_end_watch.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/holders.h"
#include "core/sharing.h"
#include "mount/child_process.h"
#include "mount/process_watch.h"
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
	char path[64], title[256];
	uint32_t job, step;
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, title, sizeof title);
		close(fd);
	}
	return n > 0 && local_steps_parse_title(title, (size_t)n, &job, &step) && job == job_id;
}

static void stepd_exited(void *arg, pid_t pid, int status);

/* Watches a slurmstepd of w's job on this node: its extern step when
 * extern_only. Returns 1 when watching (w is the watcher's), 0 when the
 * job has none here, -1 when it could not look or watch. */
static int watch_next(struct job_end *w, bool extern_only)
{
	struct local_steps here;

	for (int tries = 0; tries < 3; tries++) {
		if (local_steps_scan("/proc", local_steps_this_node(), &here) != 0)
			return -1;
		pid_t pid = local_steps_job_stepd(&here, w->job_id);
		bool is_extern = false;

		for (size_t i = 0; i < here.count; i++)
			if (here.steps[i].pid == pid)
				is_extern = here.steps[i].step_id == LOCAL_STEP_EXTERN;
		local_steps_free(&here);
		if (pid == 0 || (extern_only && !is_extern))
			return 0;
		int pidfd = child_pidfd(pid);

		if (pidfd < 0 || !is_stepd_of(pid, w->job_id)) {
			if (pidfd >= 0)
				close(pidfd);
			continue; /* it ended meanwhile: look again */
		}
		return process_watch_add(pidfd, pid, stepd_exited, w) == 0 ? 1 : -1;
	}
	return -1;
}

/* The job's last slurmstepd here is gone: release it, unless its record
 * is no longer the one its step made (released, or mounted again). */
static void release(struct job_end *w)
{
	struct daemon_state *ds = w->ds;
	const struct squashd_config *cfg = settings_hold();
	struct teardown td = TEARDOWN_INIT(cfg);

	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = holders_find_job_locked(ds, w->job_id);

	if (job && !job->pending && job->from_step && job->uid == w->uid &&
	    holders_release_job_locked(ds, w->job_id, &td) == HOLDER_RELEASED)
		log_info("job %u released: it has ended on this node (its extern step is gone) and no "
			 "epilog released it (its first step had mounted its images)", w->job_id);
	pthread_mutex_unlock(&ds->lock);
	sharing_teardown(ds, &td);
	settings_drop(cfg);
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
	else
		release(w);
	free(w);
}

int job_end_watch(struct daemon_state *ds, uint32_t job_id, uid_t uid)
{
	struct job_end *w = malloc(sizeof(*w));
	int r = -1;

	if (w) {
		*w = (struct job_end){ ds, job_id, uid };
		r = watch_next(w, true);
	}
	if (r == 1)
		return 0;
	if (r == 0)
		log_info("job %u: no extern step on this node (PrologFlags=Contain is not set); "
			 "gc releases its images after the job", job_id);
	else
		log_error("job %u: cannot watch its extern step (%m); gc releases its images after "
			  "the job", job_id);
	free(w);
	return -1;
}

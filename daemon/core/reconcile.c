#include "config.h"
#include "core/reconcile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mount/child_process.h"
#include "clock.h"
#include "util/log.h"
#include "core/scoped_mounts.h"

/* Slurm is asked about at most this many jobs per pass (the rest wait for
 * the next pass); the query child gets this long to answer. */
#define GC_BATCH 1024
#define QUERY_TIMEOUT_MS 60000
#define QUERY_OUTPUT_MAX (GC_BATCH * 64)
/* squashctl health's dry run must answer well within NHC's 10 s. */
#define DRY_RUN_TIMEOUT_MS 5000

static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER; /* one pass at a time */
static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t timer_cond;
static bool timer_stop;

/* ---------------------------------------------------------------- asking */

/* Step ids of registry entries that stand for the whole job. */
#define NO_STEP UINT32_MAX

struct verdict {
	uint32_t job_id;
	uint32_t step_id; /* NO_STEP: the job */
	char state[64]; /* "here", or why it is gone */
};

/* Runs the query child for ids (with steps[i] != NO_STEP: that step of job
 * ids[i]; steps may be NULL: jobs only); fills verdicts (same order not assumed).
 * Returns how many, or -1 with err. */
static int ask_slurm(struct daemon_state *ds, const uint32_t *ids, const uint32_t *steps, size_t n,
		     struct verdict *out, int timeout_ms, char *err, size_t errlen)
{
	char **argv = calloc(n + 4, sizeof(*argv));
	char *idtext = malloc(n * 24 + 1), *output = malloc(QUERY_OUTPUT_MAX + 1);
	int pipefd[2] = { -1, -1 }, pidfd = -1, found = -1, status = -1;
	size_t got = 0;
	pid_t pid;

	if (!argv || !idtext || !output || pipe2(pipefd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot start the Slurm query: %s", strerror(errno ? errno : ENOMEM));
		goto out;
	}
	argv[0] = (char *)"squashd";
	argv[1] = (char *)"--query-slurm";
	argv[2] = ds->node_name;
	for (size_t i = 0, off = 0; i < n; i++) {
		argv[3 + i] = idtext + off;
		if (!steps || steps[i] == NO_STEP)
			off += (size_t)sprintf(idtext + off, "%u", ids[i]) + 1;
		else
			off += (size_t)sprintf(idtext + off, "%u.%u", ids[i], steps[i]) + 1;
	}
	pid = child_fork(&pidfd);
	if (pid < 0) {
		snprintf(err, errlen, "cannot start the Slurm query: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		if (ds->cfg->slurm_conf[0])
			setenv("SLURM_CONF", ds->cfg->slurm_conf, 1);
		execv("/proc/self/exe", argv);
		dprintf(STDERR_FILENO, "squashd: error: cannot run the Slurm query: %s\n", strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	long long deadline = squash_now_ms() + timeout_ms;
	for (;;) {
		int r = child_wait_readable(pipefd[0], deadline);
		if (r != 1) {
			snprintf(err, errlen, r == 0 ? "slurmctld did not answer within %d s" : "stopped",
				 timeout_ms / 1000);
			child_abandon(pidfd);
			pidfd = -1;
			goto out;
		}
		ssize_t k = read(pipefd[0], output + got, QUERY_OUTPUT_MAX - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
		if (got == QUERY_OUTPUT_MAX)
			break;
	}
	output[got] = '\0';
	if (child_wait(pidfd, deadline, &status) != 1 || status != 0) {
		snprintf(err, errlen, "the Slurm query failed (exit status %d; its reason is in this log)",
			 status >= 0 ? (status >> 8) & 0xff : -1);
		child_abandon(pidfd);
		pidfd = -1;
		goto out;
	}
	found = 0;
	for (char *save = NULL, *line = strtok_r(output, "\n", &save); line && (size_t)found < n;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned id, step = NO_STEP;
		char state[64];
		/* "JOBID.STEPID VERDICT" for steps, "JOBID VERDICT" for jobs. */
		if (sscanf(line, "%u.%u %63[^\n]", &id, &step, state) == 3 ||
		    (step = NO_STEP, sscanf(line, "%u %63[^\n]", &id, state) == 2)) {
			out[found].job_id = id;
			out[found].step_id = step;
			snprintf(out[found].state, sizeof(out[found].state), "%s", state);
			found++;
		}
	}
out:
	if (pidfd >= 0)
		close(pidfd);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	free(argv);
	free(idtext);
	free(output);
	return found;
}

/* ---------------------------------------------------------------- in use? */

/* The number after tag ("shared:" or "master:") among the optional fields
 * of one mountinfo line (fields 7 up to the lone "-"), or 0. */
static unsigned long optional_field(const char *line, const char *tag)
{
	const char *end = strchr(line, '\n');
	size_t taglen = strlen(tag);
	int field = 0;

	if (!end)
		end = line + strlen(line);
	for (const char *p = line; p < end;) {
		while (p < end && *p == ' ')
			p++;
		const char *q = p;
		while (q < end && *q != ' ')
			q++;
		if (++field > 6) {
			if (q - p == 1 && *p == '-')
				break;
			if ((size_t)(q - p) > taglen && !strncmp(p, tag, taglen))
				return strtoul(p + taglen, NULL, 10);
		}
		p = q;
	}
	return 0;
}

/* What identifies a node-level mount in other namespaces: its device
 * ("major:minor") and its peer group (0 when it propagates nowhere). */
struct mount_identity {
	char dev[32];
	unsigned long peer_group;
};

/* The identity of the mount at path in our own namespace (dev "" when
 * there is none). */
static void identity_of(const char *mountinfo, const char *path, struct mount_identity *id)
{
	id->dev[0] = '\0';
	id->peer_group = 0;
	for (const char *line = mountinfo; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char mdev[32], mp[PATH_MAX];
		if (sscanf(line, "%*s %*s %31s %*s %4095s", mdev, mp) == 2 && !strcmp(mp, path)) {
			snprintf(id->dev, sizeof(id->dev), "%s", mdev);
			id->peer_group = optional_field(line, "shared:");
			return;
		}
	}
}

/* Whether a mountinfo line of another namespace is a copy that mount
 * propagation keeps in step with ours (a peer, or a slave such as a
 * systemd service's PrivateTmp namespace): our unmount removes it, so it
 * holds nothing. */
static bool propagated_copy(const char *line, const struct mount_identity *id)
{
	return id->peer_group && (optional_field(line, "shared:") == id->peer_group ||
				  optional_field(line, "master:") == id->peer_group);
}

static char *read_file(const char *path, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = fd >= 0 ? malloc(max + 1) : NULL;
	size_t got = 0;
	ssize_t k;

	if (!buf) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (got < max && (k = read(fd, buf + got, max - got)) > 0)
		got += (size_t)k;
	close(fd);
	buf[got] = '\0';
	return buf;
}

/* A process (not in squashd's own mount namespace) whose namespace holds a
 * mount of our mount's device that propagation does not remove with ours
 * (a step's bind, a copy made private): a live user of it. Returns its pid
 * or 0. One read of mountinfo per namespace. */
static pid_t user_of_mount(const struct mount_identity *id)
{
	struct stat own;
	ino_t seen[1024];
	size_t n_seen = 0;
	pid_t found = 0;

	if (stat("/proc/self/ns/mnt", &own) < 0)
		return 0;
	DIR *proc = opendir("/proc");
	if (!proc)
		return 0;
	for (struct dirent *de; !found && (de = readdir(proc));) {
		char path[300];
		struct stat ns;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", de->d_name);
		if (stat(path, &ns) < 0 || ns.st_ino == own.st_ino)
			continue;
		bool done = false;
		for (size_t i = 0; i < n_seen && !done; i++)
			done = seen[i] == ns.st_ino;
		if (done)
			continue;
		if (n_seen < sizeof(seen) / sizeof(seen[0]))
			seen[n_seen++] = ns.st_ino;
		snprintf(path, sizeof(path), "/proc/%s/mountinfo", de->d_name);
		char *info = read_file(path, 4 << 20);
		if (!info)
			continue;
		for (char *line = info; line && *line && !found; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
			char mdev[32];
			if (sscanf(line, "%*s %*s %31s", mdev) == 1 && !strcmp(mdev, id->dev) &&
			    !propagated_copy(line, id))
				found = (pid_t)atoi(de->d_name);
		}
		free(info);
	}
	closedir(proc);
	return found;
}

/* Whether a live process still uses a mount job_id (or its step step_id)
 * holds alone (lock not held; reads the registry under it). */
static pid_t entry_still_used(struct daemon_state *ds, uint32_t job_id, uint32_t step_id,
			      const char *mountinfo)
{
	char points[2 * SQUASH_MAX_IMAGES][PATH_MAX];
	size_t n = 0;

	pthread_mutex_lock(&ds->lock);
	struct job_entry *job = step_id == NO_STEP ? registry_find_job(&ds->registry, job_id)
						   : registry_find_step(&ds->registry, job_id, step_id);
	for (size_t i = 0; job && i < job->count; i++) {
		const struct mount_entry *m = job->images[i].mount;
		if (m && m->refcount == 1 && m->state == MOUNT_READY)
			snprintf(points[n++], PATH_MAX, "%s", m->mount_point);
		/* A step binds a writable image's overlay, not the image's mount. */
		if (job->images[i].overlay)
			snprintf(points[n++], PATH_MAX, "%s", job->images[i].overlay);
	}
	pthread_mutex_unlock(&ds->lock);
	for (size_t i = 0; i < n; i++) {
		struct mount_identity id;
		identity_of(mountinfo, points[i], &id);
		pid_t pid = id.dev[0] ? user_of_mount(&id) : 0;
		if (pid)
			return pid;
	}
	return 0;
}

static pid_t job_still_used(struct daemon_state *ds, uint32_t job_id, const char *mountinfo)
{
	return entry_still_used(ds, job_id, NO_STEP, mountinfo);
}

/* ---------------------------------------------------------------- a pass */

/* Returns the number released (ids in released, up to cap), or -1 with err. */
static int run_pass(struct daemon_state *ds, uint32_t *released, size_t cap, char *err, size_t errlen)
{
	uint32_t *ids = malloc(GC_BATCH * sizeof(*ids)), *steps = malloc(GC_BATCH * sizeof(*steps));
	struct verdict *verdicts = malloc(GC_BATCH * sizeof(*verdicts));
	size_t n = 0;
	int count = 0;

	if (!ids || !steps || !verdicts) {
		snprintf(err, errlen, "out of memory");
		count = -1;
		goto out;
	}
	pthread_mutex_lock(&ds->lock);
	for (const struct job_entry *j = ds->registry.jobs; j && n < GC_BATCH; j = j->next)
		if (!j->pending) {
			steps[n] = NO_STEP;
			ids[n++] = j->job_id;
		}
	/* Steps with images of their own: a step killed so hard that its
	 * slurmstepd never released them. */
	for (const struct job_entry *e = ds->registry.scoped; e && n < GC_BATCH; e = e->next)
		if (e->kind == HOLDER_STEP && !e->pending) {
			steps[n] = e->step_id;
			ids[n++] = e->job_id;
		}
	pthread_mutex_unlock(&ds->lock);
	if (n == 0)
		goto done;

	int found = ask_slurm(ds, ids, steps, n, verdicts, QUERY_TIMEOUT_MS, err, errlen);
	if (found < 0) {
		count = -1;
		goto out;
	}
	char *mountinfo = read_file("/proc/self/mountinfo", 4 << 20);
	for (int i = 0; i < found; i++) {
		if (!strcmp(verdicts[i].state, "here"))
			continue;
		pid_t user = !mountinfo ? 0
			     : verdicts[i].step_id == NO_STEP ? job_still_used(ds, verdicts[i].job_id, mountinfo)
			     : entry_still_used(ds, verdicts[i].job_id, verdicts[i].step_id, mountinfo);
		if (user && verdicts[i].step_id != NO_STEP) {
			log_info("gc: step %u.%u is %s in Slurm, but pid %d still uses its mount; keeping it",
				 verdicts[i].job_id, verdicts[i].step_id, verdicts[i].state, (int)user);
			continue;
		}
		if (user) {
			log_info("gc: job %u is %s in Slurm, but pid %d still uses its mount; keeping it",
				 verdicts[i].job_id, verdicts[i].state, (int)user);
			continue;
		}
		struct teardown td = { NULL };
		if (verdicts[i].step_id != NO_STEP) {
			if (scoped_release_step_gone(ds, verdicts[i].job_id, verdicts[i].step_id, &td))
				log_info("gc: released step %u.%u (Slurm: %s; its slurmstepd did not release it)",
					 verdicts[i].job_id, verdicts[i].step_id, verdicts[i].state);
			job_mounts_teardown(ds, &td);
			continue;
		}
		scoped_release_job_steps(ds, verdicts[i].job_id, &td);
		if (job_mounts_release_gone(ds, verdicts[i].job_id, &td)) {
			log_context_job(verdicts[i].job_id, -1);
			log_info("gc: released job %u (Slurm: %s; its epilog did not release it)",
				 verdicts[i].job_id, verdicts[i].state);
			log_context_clear();
			if ((size_t)count < cap)
				released[count] = verdicts[i].job_id;
			count++;
		}
		job_mounts_teardown(ds, &td);
	}
	free(mountinfo);
done:
	pthread_mutex_lock(&ds->lock);
	ds->last_gc_ms = squash_now_ms();
	pthread_mutex_unlock(&ds->lock);
out:
	free(ids);
	free(steps);
	free(verdicts);
	return count;
}

void reconcile_dry_run(struct daemon_state *ds, void (*problem)(void *arg, const char *line),
		       void *arg)
{
	uint32_t *ids = malloc(GC_BATCH * sizeof(*ids));
	struct verdict *verdicts = malloc(GC_BATCH * sizeof(*verdicts));
	char err[512], line[256];
	size_t n = 0;

	if (!ids || !verdicts)
		goto out;
	pthread_mutex_lock(&ds->lock);
	for (const struct job_entry *j = ds->registry.jobs; j && n < GC_BATCH; j = j->next)
		if (!j->pending)
			ids[n++] = j->job_id;
	pthread_mutex_unlock(&ds->lock);
	int found = n ? ask_slurm(ds, ids, NULL, n, verdicts, DRY_RUN_TIMEOUT_MS, err, sizeof(err)) : 0;
	if (found < 0) {
		log_info("health: cannot ask Slurm which jobs still run here: %s", err);
		goto out;
	}
	char *mountinfo = found ? read_file("/proc/self/mountinfo", 4 << 20) : NULL;
	for (int i = 0; i < found; i++) {
		if (!strcmp(verdicts[i].state, "here"))
			continue;
		pid_t user = mountinfo ? job_still_used(ds, verdicts[i].job_id, mountinfo) : 0;
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

void reconcile_on_demand(struct daemon_state *ds, struct reply *out)
{
	char err[512];
	uint32_t *released = calloc(GC_BATCH, sizeof(*released));

	if (!released) {
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	pthread_mutex_lock(&pass_lock);
	int n = run_pass(ds, released, GC_BATCH, err, sizeof(err));
	pthread_mutex_unlock(&pass_lock);
	if (n < 0) {
		free(released);
		log_warning("gc: %s", err);
		reply_error(out, SQUASH__STATUS__NODE_ERROR, "cannot reconcile with Slurm: %s", err);
		return;
	}
	out->resp.released_job_ids = released;
	out->resp.n_released_job_ids = (size_t)n < GC_BATCH ? (size_t)n : GC_BATCH;
}

static void *timer_loop(void *arg)
{
	struct daemon_state *ds = arg;
	char err[512];

	pthread_mutex_lock(&timer_lock);
	while (!timer_stop) {
		pthread_mutex_unlock(&timer_lock);
		pthread_mutex_lock(&pass_lock);
		int n = run_pass(ds, NULL, 0, err, sizeof(err));
		pthread_mutex_unlock(&pass_lock);
		if (n < 0)
			log_warning("gc: %s; trying again in %u s", err, ds->cfg->gc_interval_s);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += ds->cfg->gc_interval_s;
		pthread_mutex_lock(&timer_lock);
		while (!timer_stop && pthread_cond_timedwait(&timer_cond, &timer_lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&timer_lock);
	return NULL;
}

int reconcile_start(struct daemon_state *ds)
{
	pthread_condattr_t attr;
	pthread_attr_t tattr;
	pthread_t t;

	if (ds->cfg->gc_interval_s == 0)
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

void reconcile_stop(void)
{
	pthread_mutex_lock(&timer_lock);
	timer_stop = true;
	pthread_cond_broadcast(&timer_cond);
	pthread_mutex_unlock(&timer_lock);
}

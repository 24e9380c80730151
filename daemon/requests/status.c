/* status (anyone): the node's counters, settings in force, mounts by mode
 * and state, FUSE servers, loop devices, request statistics, and the
 * problems behind `squashctl health` (a registry that cannot be saved, a
 * full state directory, no loop device, readers without cgroups of their
 * own; with check_slurm from root, jobs Slurm says are gone) and its notes
 * (what a user can cause alone: mounts whose reader died, a full FUSE
 * table, loop devices kept after unmount). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "array_grow.h"
#include "clock.h"
#include "core/daemon.h"
#include "core/gc.h"
#include "core/holders.h"
#include "core/loop_devices.h"
#include "core/pinned_loops.h"
#include "core/sharing.h"
#include "core/user_budgets.h"
#include "core/user_fuse_mounts.h"
#include "requests/requests.h"
#include "core/request_stats.h"
#include "frame.h"
#include "process/reader_cgroup.h"
#include "registry/state_file.h"

/* Problems beyond the counters' own (jobs gone from Slurm may be many:
 * the rest are summed up in the last line). */
#define EXTRA_PROBLEMS 16
#define MOUNT_STATES 6
#define MODES 3
/* Space the registry needs beyond two copies of itself (old and new file
 * exist together during the atomic rewrite). */
#define STATE_DIR_SLACK (16 * 1024)
/* Rows of per-user budgets answered (about a dozen per user; about 30
 * bytes each on the wire); beyond it the rest are left out. */
#define USER_BUDGET_ROWS_MAX 2048

struct status_extra {
	struct request_stats_view stats;
	struct setting_text texts[SETTINGS_SHOWN_MAX];
	Squash__Setting settings[SETTINGS_SHOWN_MAX];
	Squash__Setting *setting_ptrs[SETTINGS_SHOWN_MAX];
	Squash__MountGroup groups[MODES * MOUNT_STATES];
	Squash__MountGroup *group_ptrs[MODES * MOUNT_STATES];
	char *problems[8 + EXTRA_PROBLEMS];
	char problem_text[EXTRA_PROBLEMS][PATH_MAX + 256];
	size_t n_extra;
	unsigned gone_untold; /* jobs gone from Slurm beyond the lines above */
	char *notes[EXTRA_PROBLEMS];
	char note_text[EXTRA_PROBLEMS][PATH_MAX + 256];
	size_t n_notes;
	Squash__UserBudget budgets[USER_BUDGET_ROWS_MAX];
	Squash__UserBudget *budget_ptrs[USER_BUDGET_ROWS_MAX];
	size_t n_budgets;
	bool budgets_of_one; /* a non-root peer: only budgets_uid's rows */
	uid_t budgets_uid;
};

/* One row of core/user_budgets.h (budget names are string literals). */
static void add_budget(void *arg, uid_t uid, const char *budget, uint64_t used, uint64_t limit)
{
	struct status_extra *x = arg;
	Squash__UserBudget *b = &x->budgets[x->n_budgets];

	if (x->n_budgets >= USER_BUDGET_ROWS_MAX || (x->budgets_of_one && uid != x->budgets_uid))
		return;
	squash__user_budget__init(b);
	b->uid = (uint32_t)uid;
	b->budget = (char *)budget;
	b->used = used;
	b->has_limit = limit > 0;
	b->limit = limit;
	x->budget_ptrs[x->n_budgets++] = b;
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

/* The counters and the registry's own problems. */
static void add_counters(struct daemon_state *ds, struct reply *out)
{
	Squash__NodeStatus *st = &out->node;
	long long now = squash_now_ms();

	squash__node_status__init(st);
	pthread_mutex_lock(&ds->lock);
	/* A failed save is retried here, and waited for (the state directory
	 * is squashd's own), so health clears as soon as it can. */
	if (ds->save_error[0])
		daemon_save_grouped_locked(ds);
	st->version = (char *)PACKAGE_VERSION;
	st->has_protocol_version = st->has_state_format = true;
	st->protocol_version = SQUASH_PROTOCOL_VERSION;
	st->state_format = STATE_FILE_FORMAT;
	st->uptime_s = (uint64_t)((now - ds->started_ms) / 1000);
	for (const struct mount_entry *m = sharing_next_mount_locked(ds, NULL); m;
	     m = sharing_next_mount_locked(ds, m)) {
		if (m->state == MOUNT_DEAD) {
			/* Counted, not a problem: its reader ran as its user,
			 * who can stop or kill it, and new jobs get a fresh
			 * mount. A problem would let any user get the node
			 * drained (health tells NHC to). squashctl health
			 * notes the count; the journal says why each died. */
			st->mounts_dead++;
		} else if (m->state == MOUNT_LINGERING) {
			/* Expected: kept for the next job, not a leak. */
			st->has_mounts_lingering = true;
			st->mounts_lingering++;
		} else if (m->state == MOUNT_READY) {
			if (m->key.mode == SQUASH__MOUNT_MODE__KERNEL)
				st->mounts_kernel++;
			else if (m->key.mode == SQUASH__MOUNT_MODE__FUSE)
				st->mounts_fuse++; /* merged mounts are counted by their images */
		}
	}
	st->has_steps = st->has_sessions = true;
	for (const struct job_entry *e = holders_next_locked(ds, NULL, NULL); e;
	     e = holders_next_locked(ds, e, NULL)) {
		if (e->kind == HOLDER_JOB) {
			st->jobs++;
			st->jobs_failed += e->status != SQUASH__STATUS__OK;
		} else if (e->kind == HOLDER_STEP)
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
	if (ds->state_lost[0]) {
		st->registry_unreadable = ds->state_lost;
		add_problem(out, "registry not read at start: %s (new mounts are refused; see docs/admin.md, "
			    "\"Upgrading slurm-squash itself\")", ds->state_lost);
	}
	if (ds->state_rebuilt[0])
		st->registry_rebuilt = ds->state_rebuilt;
	if (ds->save_error[0]) {
		snprintf(out->message, sizeof(out->message), "%s", ds->save_error);
		st->registry_error = out->message;
		add_problem(out, "registry not saved: %s (new mounts are refused)", ds->save_error);
	}
	/* The mounts of everyone then reach users' namespaces, where one
	 * user can make them fail (mount/private_roots.h). */
	if (ds->roots_shared[0])
		add_problem(out, "%s", ds->roots_shared);
	pthread_mutex_unlock(&ds->lock);
	out->resp.node = st;
}

static void add_extra(struct status_extra *x, const char *fmt, ...)
{
	va_list ap;

	if (x->n_extra >= EXTRA_PROBLEMS)
		return;
	va_start(ap, fmt);
	vsnprintf(x->problem_text[x->n_extra], sizeof(x->problem_text[0]), fmt, ap);
	va_end(ap);
	x->n_extra++;
}

/* Full: less free space than two copies of the registry and some slack,
 * or no free inode for the new copy. */
static void check_state_dir(struct daemon_state *ds, const struct squashd_config *cfg,
			    struct status_extra *x)
{
	struct statvfs sv;
	struct stat st;
	unsigned long long need = STATE_DIR_SLACK;

	if (stat(ds->state_path, &st) == 0)
		need += 2ULL * (unsigned long long)st.st_size;
	if (statvfs(cfg->state_dir, &sv) < 0) {
		add_extra(x, "state directory %s cannot be checked: %s", cfg->state_dir, strerror(errno));
		return;
	}
	unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
	if (avail < need)
		add_extra(x, "state directory full: %s has %llu KiB free, the registry needs about %llu KiB "
			  "to be saved", cfg->state_dir, avail / 1024, (need + 1023) / 1024);
	else if (sv.f_files > 0 && sv.f_favail < 2)
		add_extra(x, "state directory full: %s has no free inodes", cfg->state_dir);
}

/* A note: worth an admin's eye, not a fault of the node (exit 0). */
static void add_note(struct status_extra *x, const char *line)
{
	if (x->n_notes < EXTRA_PROBLEMS) {
		snprintf(x->note_text[x->n_notes], sizeof(x->note_text[0]), "%.*s",
			 (int)sizeof(x->note_text[0]) - 1, line);
		x->notes[x->n_notes] = x->note_text[x->n_notes];
		x->n_notes++;
	}
}

static void note_line(void *arg, const char *line)
{
	add_note(arg, line);
}

static void add_slurm_line(void *arg, const char *line, bool note)
{
	struct status_extra *x = arg;

	if (note) {
		add_note(x, line);
	} else if (x->n_extra + 1 < EXTRA_PROBLEMS) {
		add_extra(x, "%s", line);
	} else {
		x->gone_untold++;
	}
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return x < y ? -1 : x > y;
}

/* The distinct pids of pids[n] (one user's reader serves all of their
 * mounts: servers are counted once). Sorted after the registry lock is
 * let go: a walk per mount under it was quadratic in the mounts. */
static unsigned distinct_pids(pid_t *pids, size_t n)
{
	unsigned count = 0;

	if (n == 0)
		return 0; /* qsort of NULL, even of nothing, is undefined */
	qsort(pids, n, sizeof(*pids), by_pid);
	for (size_t i = 0; i < n; i++)
		count += i == 0 || pids[i] != pids[i - 1];
	return count;
}

static const char *const state_names[MOUNT_STATES] = {
	[MOUNT_MOUNTING] = "mounting", [MOUNT_READY] = "ready", [MOUNT_FAILED] = "failed",
	[MOUNT_DEAD] = "dead", [MOUNT_UNMOUNTING] = "unmounting", [MOUNT_LINGERING] = "lingering",
};

/* The operations view (fields 20-26) and the node checks' problems. req
 * is NULL unless root asks (only root's health check may make squashd ask
 * Slurm). */
static void add_operations_view(struct request *rq, const Squash__StatusRequest *req)
{
	struct daemon_state *ds = rq->ds;
	struct reply *out = rq->out;
	Squash__NodeStatus *st = &out->node;
	struct status_extra *x = calloc(1, sizeof(*x));
	unsigned counts[MODES][MOUNT_STATES] = { { 0 } };
	char problem[PATH_MAX + 256];

	if (!x || out->resp.status != SQUASH__STATUS__OK) {
		free(x);
		return;
	}
	out->extra = x;
	request_stats_fill(&x->stats, st);

	size_t n = settings_describe(rq->cfg, x->texts, SETTINGS_SHOWN_MAX);
	for (size_t i = 0; i < n; i++) {
		squash__setting__init(&x->settings[i]);
		x->settings[i].key = (char *)x->texts[i].key;
		x->settings[i].value = x->texts[i].value;
		x->setting_ptrs[i] = &x->settings[i];
	}
	st->settings = x->setting_ptrs;
	st->n_settings = n;

	pthread_mutex_lock(&ds->lock);
	unsigned loops = 0;
	pid_t *pids = NULL;
	size_t n_pids = 0, cap_pids = 0;
	bool pids_lost = false;
	for (const struct mount_entry *m = sharing_next_mount_locked(ds, NULL); m;
	     m = sharing_next_mount_locked(ds, m)) {
		if ((unsigned)m->key.mode < MODES && (unsigned)m->state < MOUNT_STATES)
			counts[m->key.mode][m->state]++;
		if (m->server_pid > 0) {
			if (array_reserve(&pids, &cap_pids, n_pids + 1, sizeof(*pids), 64) == 0)
				pids[n_pids++] = m->server_pid;
			else
				pids_lost = true;
		}
		loops += m->loop_device[0] != '\0' && m->state != MOUNT_FAILED;
	}
	/* Lingering mounts give their devices up when one is needed. */
	unsigned in_use = loop_devices_in_use_locked(ds, false);
	st->has_registry_save_errors = true;
	st->registry_save_errors = ds->registry_save_errors;
	pthread_mutex_unlock(&ds->lock);
	/* Out of memory: no count rather than a wrong one. */
	st->has_fuse_servers = !pids_lost;
	st->has_loop_devices = true;
	st->fuse_servers = distinct_pids(pids, n_pids);
	free(pids);
	st->loop_devices = loops;
	size_t g = 0;
	for (unsigned mode = 1; mode < MODES; mode++)
		for (unsigned s = 0; s < MOUNT_STATES; s++) {
			Squash__MountGroup *mg = &x->groups[g];
			squash__mount_group__init(mg);
			mg->mode = (Squash__MountMode)mode;
			mg->state = (char *)state_names[s];
			mg->count = counts[mode][s];
			x->group_ptrs[g++] = mg;
		}
	st->mount_groups = x->group_ptrs;
	st->n_mount_groups = g;

	/* As list shows a user only their own: another user's budgets say
	 * what they run here, and a long table must not crowd a user's own
	 * rows out of the answer. */
	x->budgets_of_one = rq->peer->uid != 0;
	x->budgets_uid = rq->peer->uid;
	user_budgets_collect(ds, rq->cfg, add_budget, x);
	st->user_budgets = x->budget_ptrs;
	st->n_user_budgets = x->n_budgets;

	check_state_dir(ds, rq->cfg, x);
	/* Readers without limits: one user's could take the node's tasks. */
	if (reader_cgroup_problem()[0])
		add_extra(x, "%s", reader_cgroup_problem());
	/* Root's alone, as the note below: the probe may wait up to 200 ms
	 * for a device node, which a user's status in a loop must not buy. */
	if (req && loop_devices_exhausted(rq->cfg, in_use, problem, sizeof(problem)))
		add_extra(x, "%s", problem);
	/* A note, not a problem: one user's own fusermount mounts can fill
	 * the table alone (mount_max is the node's, not per user), and a
	 * user's doing never drains the node; squashd's own share per user
	 * is bounded (max_fuse_mounts_per_user). */
	if (req && fuse_table_nearly_full(rq->cfg, problem, sizeof(problem)))
		add_note(x, problem);
	if (req && req->has_check_slurm && req->check_slurm)
		gc_dry_run(ds, rq->cfg, add_slurm_line, x);
	/* Notes, not problems: what keeps them is outside squashd, a user's
	 * own namespace or process among what can. */
	pthread_mutex_lock(&ds->lock);
	pinned_loops_notes_locked(ds, note_line, x);
	pthread_mutex_unlock(&ds->lock);
	st->notes = x->notes;
	st->n_notes = x->n_notes;
	if (x->gone_untold)
		add_extra(x, "and %u more jobs that no longer run here", x->gone_untold);

	if (x->n_extra) {
		size_t k = 0;
		for (; k < st->n_problems; k++)
			x->problems[k] = st->problems[k];
		for (size_t i = 0; i < x->n_extra; i++)
			x->problems[k++] = x->problem_text[i];
		st->problems = x->problems;
		st->n_problems = k;
	}
}

void request_status(struct request *rq)
{
	add_counters(rq->ds, rq->out);
	/* Only root's health check may make squashd ask Slurm. */
	add_operations_view(rq, rq->peer->uid == 0 ? rq->msg->status : NULL);
}

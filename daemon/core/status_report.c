#include "config.h"
#include "core/status_report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "core/loop_devices.h"
#include "core/reconcile.h"
#include "server/request_stats.h"

/* Problems beyond job_mounts_status's own (jobs gone from Slurm may be many:
 * the rest are summed up in the last line). */
#define EXTRA_PROBLEMS 16
#define MOUNT_STATES 6
#define MODES 3
/* Space the registry needs beyond two copies of itself (old and new file
 * exist together during the atomic rewrite). */
#define STATE_DIR_SLACK (16 * 1024)

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
};

static void join_prefixes(const struct squash_prefixes *p, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < p->count && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ":" : "", p->items[i]);
}

size_t settings_describe(const struct squashd_config *cfg, struct setting_text *out, size_t cap)
{
	size_t n = 0;
#define SHOW(k, ...)                                                              \
	do {                                                                      \
		if (n < cap) {                                                    \
			out[n].key = k;                                           \
			snprintf(out[n].value, sizeof(out[n].value), __VA_ARGS__); \
			n++;                                                      \
		}                                                                 \
	} while (0)
	SHOW("socket", "%s", cfg->socket_path);
	SHOW("state_dir", "%s", cfg->state_dir);
	SHOW("base_dir", "%s", cfg->base_dir);
	if (n < cap) {
		out[n].key = "allowed_targets";
		join_prefixes(&cfg->allowed_targets, out[n].value, sizeof(out[n].value));
		n++;
	}
	if (n < cap) {
		out[n].key = "trusted_prefixes";
		join_prefixes(&cfg->trusted_prefixes, out[n].value, sizeof(out[n].value));
		n++;
	}
	SHOW("mount_mode", "%s", mount_policy_name(cfg->mount_policy));
	SHOW("require_munge", "%s", cfg->require_munge ? "yes" : "no");
	SHOW("munge_socket", "%s", cfg->munge_socket);
	SHOW("squashfuse", "%s", cfg->squashfuse);
	SHOW("max_images_per_job", "%u", __atomic_load_n(&cfg->max_images_per_job, __ATOMIC_RELAXED));
	SHOW("max_loop_devices", "%u", __atomic_load_n(&cfg->max_loop_devices, __ATOMIC_RELAXED));
	SHOW("request_timeout", "%u", __atomic_load_n(&cfg->request_timeout_s, __ATOMIC_RELAXED));
	SHOW("gc_interval", "%u", __atomic_load_n(&cfg->gc_interval_s, __ATOMIC_RELAXED));
	SHOW("linger", "%u", __atomic_load_n(&cfg->linger_s, __ATOMIC_RELAXED));
	SHOW("overlay_size", "%llu", __atomic_load_n(&cfg->overlay_size, __ATOMIC_RELAXED));
	SHOW("slurm_conf", "%s", cfg->slurm_conf);
	SHOW("node_name", "%s", cfg->node_name);
	SHOW("debug", "%s", __atomic_load_n(&cfg->debug, __ATOMIC_RELAXED) ? "yes" : "no");
#undef SHOW
	return n;
}

static void add_extra(struct status_extra *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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
static void check_state_dir(struct daemon_state *ds, struct status_extra *x)
{
	struct statvfs sv;
	struct stat st;
	unsigned long long need = STATE_DIR_SLACK;

	if (stat(ds->state_path, &st) == 0)
		need += 2ULL * (unsigned long long)st.st_size;
	if (statvfs(ds->cfg->state_dir, &sv) < 0) {
		add_extra(x, "state directory %s cannot be checked: %s", ds->cfg->state_dir, strerror(errno));
		return;
	}
	unsigned long long avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
	if (avail < need)
		add_extra(x, "state directory full: %s has %llu KiB free, the registry needs about %llu KiB "
			  "to be saved", ds->cfg->state_dir, avail / 1024, (need + 1023) / 1024);
	else if (sv.f_files > 0 && sv.f_favail < 2)
		add_extra(x, "state directory full: %s has no free inodes", ds->cfg->state_dir);
}

static void add_slurm_problem(void *arg, const char *line)
{
	struct status_extra *x = arg;

	if (x->n_extra + 1 < EXTRA_PROBLEMS)
		add_extra(x, "%s", line);
	else
		x->gone_untold++;
}

static const char *const state_names[MOUNT_STATES] = {
	[MOUNT_MOUNTING] = "mounting", [MOUNT_READY] = "ready", [MOUNT_FAILED] = "failed",
	[MOUNT_DEAD] = "dead", [MOUNT_UNMOUNTING] = "unmounting", [MOUNT_LINGERING] = "lingering",
};

void status_report_extend(struct daemon_state *ds, const Squash__StatusRequest *req,
			  struct reply *out)
{
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

	size_t n = settings_describe(ds->cfg, x->texts, SETTINGS_SHOWN_MAX);
	for (size_t i = 0; i < n; i++) {
		squash__setting__init(&x->settings[i]);
		x->settings[i].key = (char *)x->texts[i].key;
		x->settings[i].value = x->texts[i].value;
		x->setting_ptrs[i] = &x->settings[i];
	}
	st->settings = x->setting_ptrs;
	st->n_settings = n;

	pthread_mutex_lock(&ds->lock);
	unsigned servers = 0, loops = 0;
	for (const struct mount_entry *m = ds->registry.mounts; m; m = m->next) {
		if ((unsigned)m->key.mode < MODES && (unsigned)m->state < MOUNT_STATES)
			counts[m->key.mode][m->state]++;
		servers += m->server_pid > 0;
		loops += m->loop_device[0] != '\0' && m->state != MOUNT_FAILED;
	}
	unsigned in_use = loop_devices_in_use_locked(ds);
	st->has_registry_save_errors = true;
	st->registry_save_errors = ds->registry_save_errors;
	pthread_mutex_unlock(&ds->lock);
	st->has_fuse_servers = st->has_loop_devices = true;
	st->fuse_servers = servers;
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

	check_state_dir(ds, x);
	if (loop_devices_exhausted(ds->cfg, in_use, problem, sizeof(problem)))
		add_extra(x, "%s", problem);
	if (req && req->has_check_slurm && req->check_slurm)
		reconcile_dry_run(ds, add_slurm_problem, x);
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

void status_report_free(struct reply *out)
{
	free(out->extra);
	out->extra = NULL;
}

#include "config.h"
#include "core/budget_rows.h"

#include <stdlib.h>

#include "core/holders.h"
#include "core/loop_devices.h"
#include "core/merged_budget.h"
#include "mount/image_work_left.h"
#include "process/reader_cgroup.h"
#include "process/reader_cgroup_usage.h"
#include "process/server_output.h"
#include "process/user_executor.h"
#include "registry/usage.h"

/* Users shown at most by one source (the status answer's rows are
 * bounded again there). */
#define USERS_MAX 1024

struct rows {
	struct daemon_state *ds;
	const struct squashd_config *cfg;
	user_budget_emit emit;
	void *arg;
};

static void registry_user(void *arg, uid_t uid, struct registry_usage u)
{
	struct rows *r = arg;

	r->emit(r->arg, uid, "registry entries", u.entries, r->cfg->registry_entries_per_user);
	r->emit(r->arg, uid, "registry bytes", u.bytes, r->cfg->registry_bytes_per_user);
	r->emit(r->arg, uid, "squash-shell sessions", holders_sessions_of_locked(r->ds, uid),
		uid == 0 ? 0 : HOLDERS_SESSIONS_PER_USER);
	r->emit(r->arg, uid, "session binds", u.session_binds,
		uid == 0 ? 0 : r->cfg->max_session_binds_per_user);
	r->emit(r->arg, uid, "kernel mounts", loop_devices_of_user_locked(r->ds, uid),
		uid == 0 ? 0 : loop_devices_user_limit(r->cfg));
	r->emit(r->arg, uid, "merged mounts", merged_mounts_of_user_locked(r->ds, uid),
		uid == 0 ? 0 : r->cfg->max_merged_mounts_per_user);
}

void registry_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			  void *arg)
{
	struct rows r = { ds, cfg, emit, arg };

	pthread_mutex_lock(&ds->lock);
	(void)registry_usage_each_user(&ds->registry, registry_user, &r);
	pthread_mutex_unlock(&ds->lock);
}

void watcher_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			 void *arg)
{
	struct user_executor_use *use = malloc(USERS_MAX * sizeof(*use));
	size_t n = use ? user_executor_usage(use, USERS_MAX) : 0;

	(void)ds;
	(void)cfg;
	for (size_t i = 0; i < n; i++) {
		emit(arg, use[i].uid, "watcher threads", use[i].threads, 1);
		emit(arg, use[i].uid, "watcher work queued", use[i].queued, 0);
		emit(arg, use[i].uid, "watcher busy ms", use[i].busy_ms, 0);
	}
	free(use);
}

static void reader_usage(void *arg, uid_t uid, enum reader_usage_kind kind, unsigned long long value)
{
	struct rows *r = arg;

	switch (kind) {
	case READER_USAGE_CPU_MS:
		r->emit(r->arg, uid, "reader CPU ms", value, 0);
		break;
	case READER_USAGE_MEMORY_BYTES:
		r->emit(r->arg, uid, "reader memory", value, reader_cgroup_memory_limit());
		break;
	case READER_USAGE_OOM_KILLS:
		r->emit(r->arg, uid, "reader OOM kills", value, 0);
		break;
	}
}

void reader_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			void *arg)
{
	struct rows r = { ds, cfg, emit, arg };
	struct server_output_use *out = malloc(USERS_MAX * sizeof(*out));
	size_t n = out ? server_output_usage(out, USERS_MAX) : 0;

	(void)ds;
	reader_cgroup_usage(READER_USAGE_CPU_MS, reader_usage, &r);
	reader_cgroup_usage(READER_USAGE_MEMORY_BYTES, reader_usage, &r);
	reader_cgroup_usage(READER_USAGE_OOM_KILLS, reader_usage, &r);
	for (size_t i = 0; i < n; i++) {
		emit(arg, out[i].uid, "reader log lines", out[i].lines, out[i].lines_burst);
		emit(arg, out[i].uid, "reader log bytes", out[i].bytes, out[i].bytes_burst);
	}
	free(out);
}

void image_work_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			    void *arg)
{
	struct image_work_use *out = malloc(USERS_MAX * sizeof(*out));
	size_t n = out ? image_work_left_each(out, USERS_MAX) : 0;

	(void)ds;
	(void)cfg;
	for (size_t i = 0; i < n; i++)
		emit(arg, out[i].uid, "image opens and closes left waiting", out[i].left,
		     out[i].uid == 0 ? 0 : IMAGE_WORK_LEFT_PER_USER);
	free(out);
}

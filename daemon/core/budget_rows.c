#include "config.h"
#include "core/budget_rows.h"

#include <stdlib.h>

#include "process/reader_cgroup.h"
#include "process/server_output.h"
#include "process/user_executor.h"
#include "registry/usage.h"

/* Users shown at most by one source (the status answer's rows are
 * bounded again there). */
#define USERS_MAX 1024

struct rows {
	const struct squashd_config *cfg;
	user_budget_emit emit;
	void *arg;
};

static void registry_user(void *arg, uid_t uid, struct registry_usage u)
{
	struct rows *r = arg;

	r->emit(r->arg, uid, "registry entries", u.entries, r->cfg->registry_entries_per_user);
	r->emit(r->arg, uid, "registry bytes", u.bytes, r->cfg->registry_bytes_per_user);
}

void registry_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			  void *arg)
{
	struct rows r = { cfg, emit, arg };

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

static void reader_cpu(void *arg, uid_t uid, unsigned long long cpu_ms)
{
	struct rows *r = arg;

	r->emit(r->arg, uid, "reader CPU ms", cpu_ms, 0);
}

void reader_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			void *arg)
{
	struct rows r = { cfg, emit, arg };
	struct server_output_use *out = malloc(USERS_MAX * sizeof(*out));
	size_t n = out ? server_output_usage(out, USERS_MAX) : 0;

	(void)ds;
	reader_cgroup_cpu_usage(reader_cpu, &r);
	for (size_t i = 0; i < n; i++) {
		emit(arg, out[i].uid, "reader log lines", out[i].lines, out[i].lines_burst);
		emit(arg, out[i].uid, "reader log bytes", out[i].bytes, out[i].bytes_burst);
	}
	free(out);
}

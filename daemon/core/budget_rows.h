/* Rows of the per-user budgets (core/user_budgets.h) for the modules that
 * only count and know nothing of the table: the registry
 * (registry/usage.h), the users' threads for work after a process's exit
 * (process/user_executor.h), their readers' CPU time
 * (process/reader_cgroup.h), their readers' output to squashd's log
 * (process/server_output.h) and the work left on their images' file
 * systems (mount/image_work_left.h). */
#ifndef SQUASHD_BUDGET_ROWS_H
#define SQUASHD_BUDGET_ROWS_H

#include "core/user_budgets.h"

/* "registry entries", "registry bytes": against registry_entries_per_user
 * and registry_bytes_per_user; "squash-shell sessions" against
 * HOLDERS_SESSIONS_PER_USER (core/holders.h). */
void registry_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			  void *arg);

/* "watcher threads" (one per user at most), "watcher work queued",
 * "watcher busy ms" (time in the user's work since start; no limit). */
void watcher_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			 void *arg);

/* "reader CPU ms" (no limit: readers share the CPU by reader_cpu_weight),
 * "reader memory" (bytes, against reader_memory_max), "reader OOM kills"
 * (their processes the kernel ended at that limit; no limit),
 * "reader log lines" and "reader log bytes" (the burst spent of each
 * reader's, refilled at one line and 16 KiB a second). */
void reader_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			void *arg);

/* "image opens and closes left waiting": the openers and the closes of
 * image descriptors still waiting on their file system, against
 * IMAGE_WORK_LEFT_PER_USER (mount/image_work_left.h). */
void image_work_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg, user_budget_emit emit,
			    void *arg);

#endif

/* The per-user budgets of squashd's shared resources (issue 37), as one
 * table of rows "uid, budget: used / limit" that `squashctl status`
 * shows. Whoever owns a budget adds a source at start (before serving);
 * the status request walks them all. A source emits one row per user and
 * budget it has something to say about; limit 0 means "no limit". */
#ifndef SQUASHD_USER_BUDGETS_H
#define SQUASHD_USER_BUDGETS_H

#include <stdint.h>
#include <sys/types.h>

#include "core/daemon.h"

/* At most this many sources (one per module owning budgets). */
#define USER_BUDGET_SOURCES_MAX 16

typedef void (*user_budget_emit)(void *arg, uid_t uid, const char *budget, uint64_t used,
				 uint64_t limit);
/* Emits the source's rows; must not block (the status request runs it). */
typedef void (*user_budget_source)(struct daemon_state *ds, const struct squashd_config *cfg,
				   user_budget_emit emit, void *arg);

/* Adds a source; call before serving (not thread-safe). */
void user_budgets_add_source(user_budget_source fn);

/* Calls every source with emit(arg, ...). */
void user_budgets_collect(struct daemon_state *ds, const struct squashd_config *cfg,
			  user_budget_emit emit, void *arg);

#endif

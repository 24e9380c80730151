#include "config.h"
#include "core/user_budgets.h"

#include <stddef.h>

static user_budget_source sources[USER_BUDGET_SOURCES_MAX];
static size_t n_sources;

void user_budgets_add_source(user_budget_source fn)
{
	if (n_sources < USER_BUDGET_SOURCES_MAX)
		sources[n_sources++] = fn;
}

void user_budgets_collect(struct daemon_state *ds, const struct squashd_config *cfg,
			  user_budget_emit emit, void *arg)
{
	for (size_t i = 0; i < n_sources; i++)
		sources[i](ds, cfg, emit, arg);
}

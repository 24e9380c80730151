/* squashctl status: the per-user budgets (NodeStatus.user_budgets), one
 * block per user with a line "budget: used / limit" each, in the order
 * squashd sent them; names come from this host's user database. */
#include "config.h"
#include "cli/squashctl_report.h"

#include <pwd.h>
#include <stdbool.h>

#include "cli/json_escape.h"

/* Whether row i is the first of its user. */
static bool first_of_user(const Squash__NodeStatus *n, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (n->user_budgets[k]->uid == n->user_budgets[i]->uid)
			return false;
	return true;
}

static const char *user_name(uint32_t uid)
{
	struct passwd *pw = getpwuid((uid_t)uid);

	return pw ? pw->pw_name : NULL;
}

void print_user_budgets(FILE *out, const Squash__NodeStatus *n)
{
	if (n->n_user_budgets)
		fprintf(out, "per-user budgets (used / limit):\n");
	for (size_t i = 0; i < n->n_user_budgets; i++) {
		if (!first_of_user(n, i))
			continue;
		uint32_t uid = n->user_budgets[i]->uid;
		const char *name = user_name(uid);
		fprintf(out, "  uid %u%s%s%s:\n", uid, name ? " (" : "", name ? name : "", name ? ")" : "");
		for (size_t k = i; k < n->n_user_budgets; k++) {
			const Squash__UserBudget *b = n->user_budgets[k];
			if (b->uid != uid)
				continue;
			if (b->has_limit)
				fprintf(out, "    %s: %llu / %llu\n", b->budget, (unsigned long long)b->used,
					(unsigned long long)b->limit);
			else
				fprintf(out, "    %s: %llu / no limit\n", b->budget, (unsigned long long)b->used);
		}
	}
}

void print_user_budgets_json(FILE *out, const Squash__NodeStatus *n)
{
	bool first = true;

	fprintf(out, ",\"user_budgets\":[");
	for (size_t i = 0; i < n->n_user_budgets; i++) {
		if (!first_of_user(n, i))
			continue;
		uint32_t uid = n->user_budgets[i]->uid;
		const char *name = user_name(uid);
		fprintf(out, "%s{\"uid\":%u,\"user\":", first ? "" : ",", uid);
		first = false;
		if (name)
			json_write_string(out, name);
		else
			fprintf(out, "null");
		fprintf(out, ",\"budgets\":{");
		bool first_row = true;
		for (size_t k = i; k < n->n_user_budgets; k++) {
			const Squash__UserBudget *b = n->user_budgets[k];
			if (b->uid != uid)
				continue;
			fprintf(out, "%s", first_row ? "" : ",");
			first_row = false;
			json_write_string(out, b->budget);
			fprintf(out, ":{\"used\":%llu,\"limit\":", (unsigned long long)b->used);
			if (b->has_limit)
				fprintf(out, "%llu}", (unsigned long long)b->limit);
			else
				fprintf(out, "null}");
		}
		fprintf(out, "}}");
	}
	fputc(']', out);
}

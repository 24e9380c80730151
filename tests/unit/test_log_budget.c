/* The log budget per user (daemon/util/log_budget.c): a uid gets a burst
 * of LOG_BUDGET_BURST lines, then one per LOG_BUDGET_REFILL_MS; the lines
 * it is refused are counted and handed to the next line it may log; root
 * always may; another uid's budget is its own; a full table makes room by
 * the uid that asked longest ago; a clock that goes back refuses nothing
 * it would not have. */
#include "config.h"

#include <string.h>

#include "util/log_budget.h"
#include "unit.h"

static struct log_budget b;

int main(void)
{
	unsigned long left;
	long long t = 1000000;
	int ok = 0;

	memset(&b, 0, sizeof(b));
	for (int i = 0; i < 100; i++)
		ok += log_budget_take(&b, 1000, t, &left);
	CHECK_INT(ok, LOG_BUDGET_BURST);

	/* Another user is untouched; root is never counted. */
	CHECK(log_budget_take(&b, 1001, t, &left));
	CHECK_INT(left, 0);
	for (int i = 0; i < 1000; i++)
		CHECK(log_budget_take(&b, 0, t, &left));

	/* Just short of a refill: still nothing; then one line, which says
	 * how many were left out, and the count starts again. */
	CHECK(!log_budget_take(&b, 1000, t + LOG_BUDGET_REFILL_MS - 1, &left));
	CHECK(log_budget_take(&b, 1000, t + LOG_BUDGET_REFILL_MS, &left));
	CHECK_INT(left, 100 - LOG_BUDGET_BURST + 1);
	CHECK(!log_budget_take(&b, 1000, t + LOG_BUDGET_REFILL_MS, &left));
	CHECK(log_budget_take(&b, 1000, t + 2 * LOG_BUDGET_REFILL_MS, &left));
	CHECK_INT(left, 1);

	/* A long quiet time refills the burst, no more. */
	t += 1000LL * LOG_BUDGET_REFILL_MS;
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += log_budget_take(&b, 1000, t, &left);
	CHECK_INT(ok, LOG_BUDGET_BURST);

	/* A clock that goes back: no line more than the budget. */
	CHECK(!log_budget_take(&b, 1000, t - 5 * LOG_BUDGET_REFILL_MS, &left));
	CHECK(!log_budget_take(&b, 1000, t - 5 * LOG_BUDGET_REFILL_MS + 1, &left));

	/* A full table: every other uid in turn makes room; then uid 1000,
	 * the one that asked longest ago, has been replaced and starts over
	 * with a full burst (its left-out count is lost with it). */
	for (unsigned u = 0; u < LOG_BUDGET_USERS; u++)
		CHECK(log_budget_take(&b, 5000 + u, t + 1 + u, &left));
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += log_budget_take(&b, 1000, t + 1000, &left);
	CHECK_INT(ok, LOG_BUDGET_BURST);
	/* ... and the one it took over was the oldest: 5000 is gone, 5001
	 * still has its slot (one line spent). */
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += log_budget_take(&b, 5001, t + 1000, &left);
	CHECK_INT(ok, LOG_BUDGET_BURST - 1);
	return unit_exit_code();
}

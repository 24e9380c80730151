/* The log budget per user (daemon/util/log_budget.c): a uid gets a burst
 * of LOG_BUDGET_BURST lines, then one per LOG_BUDGET_REFILL_MS; the lines
 * it is refused are counted and handed to the next line it may log; root
 * always may; another uid's budget is its own; a full table makes room by
 * the uid that asked longest ago once it has been quiet for
 * LOG_BUDGET_QUIET_MS, and until then the uids past it share one budget;
 * a clock that goes back refuses nothing it would not have. */
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

	/* A full table of busy uids: 300 more uids in turn (a subordinate uid
	 * range) share one burst, not one each; said so. */
	memset(&b, 0, sizeof(b));
	t += 1000LL * LOG_BUDGET_REFILL_MS;
	for (unsigned u = 0; u < LOG_BUDGET_USERS; u++)
		CHECK(log_budget_take(&b, 5000 + u, t + u, &left));
	bool shared = false;
	ok = 0;
	for (int round = 0; round < 3; round++)
		for (unsigned u = 0; u < 300; u++) {
			bool sh;

			ok += log_budget_take_from(&b, 9000 + u, t + LOG_BUDGET_USERS, &left, &sh);
			shared |= sh;
		}
	CHECK_INT(ok, LOG_BUDGET_BURST);
	CHECK(shared);
	/* A uid with a slot of its own is untouched by them. */
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += log_budget_take(&b, 5001, t + LOG_BUDGET_USERS, &left);
	CHECK_INT(ok, LOG_BUDGET_BURST - 1);

	/* Once the uid that asked longest ago (5000) has been quiet for
	 * LOG_BUDGET_QUIET_MS (its burst full again by then), a new uid takes
	 * its slot: a burst of its own, not the shared one. */
	long long later = t + LOG_BUDGET_QUIET_MS;
	bool sh = true;
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += log_budget_take_from(&b, 1000, later, &left, &sh);
	CHECK_INT(ok, LOG_BUDGET_BURST);
	CHECK(!sh);
	/* ... 5000's, the oldest: 5002 still has its slot (one line spent). */
	ok = 0;
	for (int i = 0; i < 100; i++)
		ok += log_budget_take(&b, 5002, t + LOG_BUDGET_USERS + 1, &left);
	CHECK_INT(ok, LOG_BUDGET_BURST - 1);
	return unit_exit_code();
}

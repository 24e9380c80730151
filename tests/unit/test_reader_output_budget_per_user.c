/* What squashctl status shows of a user's readers' output budgets
 * (daemon/process/server_output.c): the lines and bytes spent of each
 * reader's burst, summed per user, the bursts as the limit; another
 * user's output counts for that user alone. */
#include "config.h"

#include <stdbool.h>
#include <unistd.h>

#include "clock.h"
#include "process/server_output.h"
#include "unit.h"

/* uid's row, waiting up to 5 s for want_lines lines to be read. */
static struct server_output_use row_of(uid_t uid, unsigned long long want_lines)
{
	long long deadline = squash_now_ms() + 5000;
	struct server_output_use out[8], none = { 0 };

	for (;;) {
		size_t n = server_output_usage(out, 8);
		for (size_t i = 0; i < n; i++)
			if (out[i].uid == uid && (out[i].lines >= want_lines || squash_now_ms() > deadline))
				return out[i];
		if (squash_now_ms() > deadline)
			return none;
		usleep(10 * 1000);
	}
}

int main(void)
{
	int a[2], b[2], c[2];
	const char three[] = "one\ntwo\nthree\n";

	if (pipe(a) < 0 || pipe(b) < 0 || pipe(c) < 0)
		return 99;
	/* User 1001 has two readers (two streams), user 1002 one. */
	server_output_watch(a[0], 11, 1001, "/x/squash-reader");
	server_output_watch(b[0], 12, 1001, "/x/squash-reader");
	server_output_watch(c[0], 13, 1002, "/x/squash-reader");
	CHECK_INT(write(a[1], three, sizeof(three) - 1), sizeof(three) - 1);
	CHECK_INT(write(b[1], "four\n", 5), 5);

	struct server_output_use u = row_of(1001, 4);
	CHECK_INT(u.uid, 1001);
	CHECK_INT(u.lines, 4);
	CHECK_INT(u.lines_burst, 2 * 20);
	/* Refilled at 16 KiB a second: what was read may be back already. */
	CHECK(u.bytes <= sizeof(three) - 1 + 5);
	CHECK_INT(u.bytes_burst, 2 * 64 * 1024);
	u = row_of(1002, 0);
	CHECK_INT(u.uid, 1002);
	CHECK_INT(u.lines, 0);
	CHECK_INT(u.lines_burst, 20);
	/* A reader gone (its pipe closed) leaves its user's row. */
	close(c[1]);
	long long deadline = squash_now_ms() + 5000;
	bool gone = false;
	while (!gone && squash_now_ms() < deadline) {
		struct server_output_use out[8];
		size_t n = server_output_usage(out, 8);
		gone = true;
		for (size_t i = 0; i < n; i++)
			gone = gone && out[i].uid != 1002;
		usleep(10 * 1000);
	}
	CHECK(gone);
	return unit_exit_code();
}

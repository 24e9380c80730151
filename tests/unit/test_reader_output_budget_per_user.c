/* What squashctl status shows of a user's readers' output budgets
 * (daemon/process/server_output.c): the lines and bytes spent of each
 * reader's burst, summed per user, the bursts as the limit; another
 * user's output counts for that user alone. A stream ends with its pipe,
 * or with its server's exit though its pipe's write end lives on (passed
 * to another process). And what reaches the log: a user's readers
 * together get one burst of lines (util/log_budget.h's, a budget of
 * their own), not a burst each. */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "process/server_output.h"
#include "util/log_budget.h"
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

/* Whether uid's row goes within 5 s (its last stream ended). */
static bool row_gone(uid_t uid)
{
	long long deadline = squash_now_ms() + 5000;

	while (squash_now_ms() < deadline) {
		struct server_output_use out[8];
		size_t n = server_output_usage(out, 8);
		bool gone = true;

		for (size_t i = 0; i < n; i++)
			gone = gone && out[i].uid != uid;
		if (gone)
			return true;
		usleep(10 * 1000);
	}
	return false;
}

int main(void)
{
	int a[2], b[2], c[2];
	const char three[] = "one\ntwo\nthree\n";

	/* The log goes to a file this test reads (no journal here). */
	char logname[] = "/tmp/test_reader_output.XXXXXX";
	int logfd = mkstemp(logname), saved_stderr = dup(2);

	if (logfd < 0 || saved_stderr < 0 || dup2(logfd, 2) < 0)
		return 99;
	unlink(logname);
	if (pipe(a) < 0 || pipe(b) < 0 || pipe(c) < 0)
		return 99;
	/* User 1001 has two readers (two streams), user 1002 one. */
	server_output_watch(a[0], -1, 11, 1001, "/x/squash-reader");
	server_output_watch(b[0], -1, 12, 1001, "/x/squash-reader");
	server_output_watch(c[0], -1, 13, 1002, "/x/squash-reader");
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
	CHECK(row_gone(1002));

	/* A server (a child here) whose write end another process keeps (we
	 * do): its stream goes when it exits. */
	int d[2];
	if (pipe(d) < 0)
		return 99;
	pid_t kid = fork();
	if (kid == 0) {
		pause();
		_exit(0);
	}
	int pidfd = (int)syscall(SYS_pidfd_open, kid, 0);
	CHECK(pidfd >= 0);
	server_output_watch(d[0], pidfd, kid, 1003, "/x/squash-reader");
	close(pidfd);
	CHECK_INT(write(d[1], "before\n", 7), 7);
	CHECK_INT(row_of(1003, 1).lines, 1);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	CHECK(row_gone(1003));
	/* Its reader closed: the write end we kept now writes into nothing. */
	signal(SIGPIPE, SIG_IGN);
	CHECK_INT(write(d[1], "after\n", 6), -1);
	close(d[1]);

	/* User 1004's three readers log 15 lines each, within each one's
	 * burst: the log gets the user's burst of lines in all, then says
	 * how many were left out (with its next line). */
	int e[3][2];
	for (int i = 0; i < 3; i++) {
		if (pipe(e[i]) < 0)
			return 99;
		server_output_watch(e[i][0], -1, 20 + i, 1004, "/x/squash-reader");
	}
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 15; k++)
			CHECK_INT(write(e[i][1], "line\n", 5), 5);
	CHECK_INT(row_of(1004, 45).lines, 45);
	for (int i = 0; i < 3; i++)
		close(e[i][1]);
	CHECK(row_gone(1004));
	char text[64 * 1024];
	ssize_t got = pread(logfd, text, sizeof(text) - 1, 0);
	CHECK(got > 0);
	text[got > 0 ? got : 0] = '\0';
	unsigned lines = 0;
	for (const char *p = text; (p = strstr(p, "(uid 1004): line")); p++)
		lines++;
	/* At most one more than the burst: one may refill while it runs. */
	CHECK(lines >= LOG_BUDGET_BURST && lines <= LOG_BUDGET_BURST + 1);
	/* The failed checks above went to the log file too: show it all. */
	if (unit_failures) {
		got = pread(logfd, text, sizeof(text) - 1, 0);
		text[got > 0 ? got : 0] = '\0';
	}
	dup2(saved_stderr, 2);
	if (unit_failures)
		fprintf(stderr, "the log (%u lines of uid 1004's readers), failed checks among it:\n%s",
			lines, text);
	return unit_exit_code();
}

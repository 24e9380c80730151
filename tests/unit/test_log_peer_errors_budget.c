/* Error lines logged while squashd works on a user's request have a budget
 * per user of their own (daemon/util/log.c): a user who makes request
 * after request fail as a node error (an image that cannot be read, a
 * reader they trace) gets LOG_BUDGET_BURST error lines, not one per
 * request; that user's info lines keep their own budget, another user's
 * errors theirs, and squashd's own errors (no user) are never held back. */
#define _GNU_SOURCE
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/log_budget.h"
#include "unit.h"

static unsigned count(const char *out, const char *what)
{
	unsigned n = 0;

	for (const char *l = out; (l = strstr(l, what)); l++)
		n++;
	return n;
}

int main(void)
{
	static char out[1 << 16];
	int p[2], err = dup(STDERR_FILENO);
	ssize_t got;

	alarm(20);
	unsetenv("JOURNAL_STREAM");
	if (err < 0 || pipe(p) < 0)
		return 99;
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	dup2(p[1], STDERR_FILENO);
	log_init(false);
	log_context_peer(1000);
	for (int i = 0; i < 3 * LOG_BUDGET_BURST; i++)
		log_error("user1000 error %d", i);
	for (int i = 0; i < 5; i++)
		log_info("user1000 info %d", i);
	log_context_peer(1001);
	log_error("user1001 error");
	log_context_clear();
	for (int i = 0; i < 3 * LOG_BUDGET_BURST; i++)
		log_error("squashd error %d", i);
	dup2(err, STDERR_FILENO);
	close(p[1]);
	got = read(p[0], out, sizeof(out) - 1);
	out[got > 0 ? got : 0] = '\0';

	CHECK_INT(count(out, "squashd: error: user1000 error"), LOG_BUDGET_BURST);
	CHECK_INT(count(out, "squashd: info: user1000 info"), 5);
	CHECK_INT(count(out, "squashd: error: user1001 error"), 1);
	CHECK_INT(count(out, "squashd: error: squashd error"), 3 * LOG_BUDGET_BURST);
	return unit_exit_code();
}

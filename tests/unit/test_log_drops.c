/* squashd never waits for its log (daemon/util/log.c): with stderr a pipe
 * nobody reads, lines that do not fit are dropped, not waited for, and
 * every one of them is counted: once the pipe is read again, the lines
 * that came through and the counts said make the lines logged, exactly,
 * however the counts' own lines fared meanwhile. The pipe's other
 * writers keep a blocking descriptor. */
#define _GNU_SOURCE
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "unit.h"

#define LINES 2000

static size_t drain(int fd, char *buf, size_t used, size_t cap)
{
	ssize_t n;

	while (used < cap - 1 && (n = read(fd, buf + used, cap - 1 - used)) > 0)
		used += (size_t)n;
	buf[used] = '\0';
	return used;
}

int main(void)
{
	static char out[1 << 20];
	int p[2], err = dup(STDERR_FILENO);
	size_t used = 0;
	unsigned long through = 0, said = 0;

	alarm(20);
	unsetenv("JOURNAL_STREAM");
	if (err < 0 || pipe(p) < 0)
		return 99;
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	dup2(p[1], STDERR_FILENO);
	log_init(false);
	/* Long and short lines: a short one may still fit in the pipe's
	 * last page when a long one did not, and the count after it not. */
	for (int i = 0; i < LINES; i++)
		log_info("line %d of the flood%s", i, i % 3 ? "" : " ................................................."
			 "..............................................................................");
	used = drain(p[0], out, used, sizeof(out));
	log_info("after the drain");
	used = drain(p[0], out, used, sizeof(out));
	int blocking = fcntl(STDERR_FILENO, F_GETFL) & O_NONBLOCK;
	dup2(err, STDERR_FILENO);

	for (char *l = out; (l = strstr(l, "squashd: ")); l++) {
		unsigned long n;
		if (!strncmp(l, "squashd: info: line ", 20))
			through++;
		else if (sscanf(l, "squashd: warning: %lu log lines were dropped: the log (squashd's stderr) "
				"did not take them at once", &n) == 1)
			said += n;
	}
	CHECK(through > 0 && through < LINES);
	CHECK_INT(through + said, LINES);
	CHECK(strstr(out, "squashd: info: after the drain\n") != NULL);
	CHECK_INT(blocking, 0); /* fd 2 itself was left as it was */
	return unit_exit_code();
}

/* A child of squashd that may be held by a user's file system keeps only
 * the descriptors it is given (daemon/util/close_from.c, close_all_but):
 * everything else from 3 up is closed, whatever order the kept ones come
 * in, -1 and 0..2 among them changing nothing. Each case runs in a
 * child, as squashd's do. */
#include "config.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/close_from.h"
#include "unit.h"

#define TOP 48 /* descriptors opened: 3..TOP-1 */

/* Whether, in a child after close_all_but(keep, n), exactly the
 * descriptors of want (a bit per descriptor below TOP) are open. */
static bool leaves_open(const int *keep, size_t n, uint64_t want)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		uint64_t got = 0;

		close_all_but(keep, n);
		for (int fd = 0; fd < TOP + 16; fd++)
			if (fcntl(fd, F_GETFD) >= 0)
				got |= fd < 64 ? 1ULL << fd : 0;
		if (got != want)
			fprintf(stderr, "open: %#llx, expected %#llx\n", (unsigned long long)got,
				(unsigned long long)want);
		_exit(got == want ? 0 : 1);
	}
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

int main(void)
{
	const uint64_t std = 7; /* 0, 1 and 2 are never closed */

	close_from(3); /* what the test runner left open */
	for (int fd = 3; fd < TOP; fd++)
		CHECK_INT(open("/dev/null", O_RDONLY | O_CLOEXEC), fd);

	int keep[] = { 33, 5, -1, 2, 7 };
	CHECK(leaves_open(keep, 5, std | 1ULL << 5 | 1ULL << 7 | 1ULL << 33));
	CHECK(leaves_open(NULL, 0, std));
	int last[] = { TOP - 1 };
	CHECK(leaves_open(last, 1, std | 1ULL << (TOP - 1)));
	/* More than CLOSE_ALL_BUT_MAX: the first ones are kept, no more. */
	int many[CLOSE_ALL_BUT_MAX + 4];
	uint64_t want = std;
	for (int i = 0; i < CLOSE_ALL_BUT_MAX + 4; i++) {
		many[i] = 40 - i;
		if (i < CLOSE_ALL_BUT_MAX)
			want |= 1ULL << (40 - i);
	}
	CHECK(leaves_open(many, CLOSE_ALL_BUT_MAX + 4, want));
	return unit_exit_code();
}

/* The CPU a worker follows a requester to (daemon/reader/worker_cpu.c):
 * a thread bound to one CPU, that CPU; a thread free to move, the CPU it
 * runs on (read from /proc/TID/stat, whatever its name holds: spaces and
 * parentheses), unless only a bound CPU is asked for (a READ's requester);
 * no requester (pid 0) or one that is gone, -1. */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "reader/worker_cpu.h"
#include "unit.h"

static uint32_t tid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

/* requester_cpu of the calling thread equals the CPU it runs on, read
 * before and after (a migration in between is tried again). */
static int own_cpu_matches(void)
{
	for (int tries = 0; tries < 100; tries++) {
		int before = sched_getcpu(), got = requester_cpu(tid(), false), after = sched_getcpu();

		if (before == after)
			return got == before;
	}
	return 0;
}

int main(void)
{
	cpu_set_t all, one;
	int first = -1;

	CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &all))
			first = c;
	CHECK(first >= 0);

	CHECK_INT(requester_cpu(0, false), -1);
	/* Above pid_max (at most 2^22): no such thread. */
	CHECK_INT(requester_cpu(1u << 30, false), -1);

	/* Free to move (or on one CPU only): where it runs. */
	CHECK(own_cpu_matches());
	/* A name that would fool a parse from the left. */
	CHECK(prctl(PR_SET_NAME, "a) b ) c 9 9", 0, 0, 0) == 0);
	CHECK(own_cpu_matches());

	/* Bound to one CPU: that CPU. */
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	CHECK(sched_setaffinity(0, sizeof(one), &one) == 0);
	CHECK_INT(requester_cpu(tid(), false), first);
	CHECK_INT(requester_cpu(tid(), true), first);
	CHECK(sched_setaffinity(0, sizeof(all), &all) == 0);
	/* Free to move, asked for a bound CPU only (a READ's requester). */
	if (CPU_COUNT(&all) > 1)
		CHECK_INT(requester_cpu(tid(), true), -1);

	/* Another thread of the process, by its thread id. */
	CHECK(requester_cpu((uint32_t)getpid(), false) >= 0);
	return unit_exit_code();
}

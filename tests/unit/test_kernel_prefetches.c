/* The bound on kernel mounts' start-profile prefetches (daemon/core/
 * kernel_prefetches.c): a user holds at most KERNEL_PREFETCHES_PER_USER
 * places and the node KERNEL_PREFETCHES_MAX; a place is held while the
 * process behind it lives (here a child holding its end of a socket, as
 * squash-reader --prefetch holds its answer socket) and is free again once
 * it exits; a start with no spawner gives its place back at once; the
 * status rows count each user once. No root needed. */
#include "config.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/kernel_prefetches.h"
#include "unit.h"

/* A place for uid held by a child that lives until killed; its pid in *pid. */
static int hold_with_child(uid_t uid, pid_t *pid)
{
	int sv[2], place = kernel_prefetches_take(uid);

	if (place < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	*pid = fork();
	if (*pid == 0) {
		close(sv[0]);
		pause();
		_exit(0);
	}
	close(sv[1]);
	kernel_prefetches_hold(place, sv[0]);
	return place;
}

static void end_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

struct rows {
	unsigned rows_of_1000, used_of_1000, limit_of_1000;
};

static void count_row(void *arg, uid_t uid, const char *budget, uint64_t used, uint64_t limit)
{
	struct rows *r = arg;

	if (uid != 1000 || strcmp(budget, "kernel prefetches") != 0)
		return;
	r->rows_of_1000++;
	r->used_of_1000 = (unsigned)used;
	r->limit_of_1000 = (unsigned)limit;
}

int main(void)
{
	pid_t kids[KERNEL_PREFETCHES_MAX];
	int n = 0;

	/* One user: their share, then no more. */
	for (int i = 0; i < KERNEL_PREFETCHES_PER_USER; i++)
		CHECK(hold_with_child(1000, &kids[n++]) >= 0);
	CHECK_INT(kernel_prefetches_take(1000), -1);
	CHECK_INT(kernel_prefetches_of(1000), KERNEL_PREFETCHES_PER_USER);

	struct rows r = { 0, 0, 0 };
	kernel_prefetches_budget_rows(NULL, NULL, count_row, &r);
	CHECK_INT(r.rows_of_1000, 1);
	CHECK_INT(r.used_of_1000, KERNEL_PREFETCHES_PER_USER);
	CHECK_INT(r.limit_of_1000, KERNEL_PREFETCHES_PER_USER);

	/* Other users fill the node; then nobody gets a place, root neither. */
	for (uid_t u = 2000; n < KERNEL_PREFETCHES_MAX; u++)
		for (int i = 0; i < KERNEL_PREFETCHES_PER_USER && n < KERNEL_PREFETCHES_MAX; i++)
			CHECK(hold_with_child(u, &kids[n++]) >= 0);
	CHECK_INT(kernel_prefetches_take(3000), -1);
	CHECK_INT(kernel_prefetches_take(0), -1);

	/* The first user's first process ends: its place is theirs again. */
	end_child(kids[0]);
	CHECK_INT(kernel_prefetches_of(1000), KERNEL_PREFETCHES_PER_USER - 1);
	pid_t again;
	CHECK(hold_with_child(1000, &again) >= 0);
	CHECK_INT(kernel_prefetches_take(1000), -1);
	end_child(again);

	/* Without a spawner nothing starts, and the place is not kept. */
	for (int i = 1; i < n; i++)
		end_child(kids[i]);
	CHECK_INT(kernel_prefetches_of(1000), 0);
	kernel_prefetches_start("/usr/sbin/squash-reader", 0, "/run/squashd/mnt/m1", 1000);
	CHECK_INT(kernel_prefetches_of(1000), 0);

	/* Root is bound by the node's places only. */
	for (int i = 0; i < KERNEL_PREFETCHES_MAX; i++)
		CHECK(kernel_prefetches_take(0) >= 0);
	CHECK_INT(kernel_prefetches_take(0), -1);
	return unit_exit_code();
}

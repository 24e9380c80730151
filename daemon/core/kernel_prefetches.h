/* The start-profile prefetches that kernel mounts start
 * (mount/kernel_prefetch.h), bounded. Each is a process of its own, in
 * squashd's cgroup (its tasks count against squashd.service's TasksMax,
 * the pages it reads are charged there), started by whichever user's
 * request made the mount; one user mounting trusted image after trusted
 * image could otherwise start any number of them. At most
 * KERNEL_PREFETCHES_MAX run at once on the node and
 * KERNEL_PREFETCHES_PER_USER for one user (root: the node's bound only).
 * Past either, the mount is made without reading ahead: a prefetch is
 * advice, nothing waits for it. A prefetch holds its place until its
 * process ends (it ends by itself, at the latest after
 * KERNEL_PREFETCH_MAX_S); places are looked at again at each start. */
#ifndef SQUASHD_KERNEL_PREFETCHES_H
#define SQUASHD_KERNEL_PREFETCHES_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/user_budgets.h"

#define KERNEL_PREFETCHES_MAX 8
#define KERNEL_PREFETCHES_PER_USER 2

/* Starts the prefetch of image_fd's start profile for uid's mount at
 * mount_point (walked too), when there is a place for it. Never blocks. */
void kernel_prefetches_start(const char *reader_path, int image_fd, const char *mount_point, uid_t uid);

/* Before mount_point is unmounted: kills the prefetch still reading ahead
 * and walking it, if any, and waits a moment for it to go, so that the
 * walk does not keep the mount busy (a lazy unmount, and a release that
 * waits for it, which may be another user's). */
void kernel_prefetches_stop(const char *mount_point);

/* The bound itself, apart from the process (unit tests): a place for uid,
 * or -1 when there is none; then kernel_prefetches_hold(place, held)
 * with what kernel_prefetch_start returned (-1 gives the place back). */
int kernel_prefetches_take(uid_t uid);
void kernel_prefetches_hold(int place, int held);
/* How many places uid holds (ended processes let go first). */
unsigned kernel_prefetches_of(uid_t uid);

/* "kernel prefetches" per user with any (core/user_budgets.h). */
void kernel_prefetches_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
				   user_budget_emit emit, void *arg);

#endif

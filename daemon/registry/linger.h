/* Lingering node-level mounts (squashd.conf `linger = SECONDS`): a mount
 * whose last holder went stays mounted for that long, in state LINGERING,
 * so the next job on the same image in the same sharing domain (job
 * arrays, pipelines) takes it over without mounting again. These are the
 * state changes of one mount entry; the thread that tears down what
 * expired is core/linger_timer.c. A mount adopted after a crash keeps its
 * recorded expiry (the state file stores it as wall-clock time). */
#ifndef SQUASHD_LINGER_H
#define SQUASHD_LINGER_H

#include <stdbool.h>
#include <time.h>

#include "registry/registry.h"

/* The last reference of ready mount m went at now_ms: makes it linger for
 * linger_s seconds and returns true, or returns false when linger_s is 0. */
bool linger_begin(struct mount_entry *m, unsigned linger_s, long long now_ms);

/* A new holder takes over lingering mount m. */
void linger_take_over(struct mount_entry *m, long long now_ms);

/* Seconds m still lingers at now_ms (rounded up); 0 when it does not. */
unsigned linger_left_s(const struct mount_entry *m, long long now_ms);

/* The wall-clock second at which m expires (now_ms and now_wall: the same
 * moment on both clocks), for the state file; and the reverse when it is
 * read back, capped at SQUASHD_LINGER_MAX_S from now. */
time_t linger_expiry_wall(const struct mount_entry *m, long long now_ms, time_t now_wall);
void linger_restore(struct mount_entry *m, time_t expiry_wall, long long now_ms, time_t now_wall);

/* Marks the lingering mounts that expired by now_ms (all of them when
 * all) UNMOUNTING and chains them on *expired (teardown_next). Returns the
 * earliest expiry still to come, or 0 when nothing else lingers. */
long long linger_collect(struct registry *r, bool all, long long now_ms,
			 struct mount_entry **expired);

#endif

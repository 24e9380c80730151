/* Lingering node-level mounts (squashd.conf `linger = SECONDS`): a mount
 * whose last job went stays mounted for that long, in state LINGERING, so
 * the next job on the same image in the same sharing domain (job arrays,
 * pipelines) takes it over without mounting again. One thread sleeps on
 * the registry's condition variable until the earliest expiry (or a
 * change) and tears down what expired. On stop every lingering mount is
 * torn down; a mount adopted after a crash keeps its recorded expiry. */
#ifndef SQUASHD_LINGER_H
#define SQUASHD_LINGER_H

#include <stdbool.h>
#include <time.h>

#include "core/job_mounts.h"

/* The last reference of ready mount m went (ds->lock held): makes it
 * linger and returns true, or returns false when linger is off. */
bool linger_begin_locked(struct daemon_state *ds, struct mount_entry *m);

/* A new job takes over lingering mount m (ds->lock held). */
void linger_take_over_locked(struct daemon_state *ds, struct mount_entry *m);

/* Seconds m still lingers (rounded up); 0 when it does not linger. */
unsigned linger_left_s(const struct mount_entry *m, long long now_ms);

/* The wall-clock second at which m expires, for the state file, and the
 * reverse when it is read back. */
time_t linger_expiry_wall(const struct mount_entry *m);
void linger_restore(struct mount_entry *m, time_t expiry_wall);

/* Starts the expiry thread (after adoption). Returns 0 or -1. */
int linger_start(struct daemon_state *ds);

/* After job_mounts_stop: the thread tears down every lingering mount and
 * ends; waits for it. */
void linger_finish(void);

#endif

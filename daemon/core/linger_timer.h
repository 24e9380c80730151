/* The thread that ends lingering mounts (registry/linger.h): it sleeps on
 * the registry's condition variable until the earliest expiry (or a
 * change) and hands what expired to its owner's thread
 * (process/user_executor.h) to tear down: a stopped reader delays only its
 * own user's. On stop every lingering mount is torn down here. */
#ifndef SQUASHD_LINGER_TIMER_H
#define SQUASHD_LINGER_TIMER_H

#include "core/daemon.h"

/* Starts the thread (after adoption). Returns 0 or -1. */
int linger_timer_start(struct daemon_state *ds);

/* After daemon_stop: the thread tears down every lingering mount and
 * ends; waits for it, and (bounded) for the users' threads' work
 * (process/user_executor.h). */
void linger_timer_finish(void);

#endif

/* Mounts over a user's FUSE mounts that a request gave up waiting for (a
 * merge's overlay, core/merge.c; a :rw image's overlay, core/overlay.c):
 * each keeps a thread of squashd's inside mount(2) until the user's
 * reader answers or dies (util/deadline_call.h). squashd kills the silent
 * reader, but a user who stops every reader it restarts keeps those
 * threads: so each user has at most GIVEN_UP_MOUNTS_PER_USER of these
 * mounts running at once, given up on or not. The next one waits for a
 * place until its request's deadline, and is refused at once, as a user
 * error, while all are given up on. Other users' mounts never wait on
 * them. */
#ifndef SQUASHD_GIVEN_UP_MOUNTS_H
#define SQUASHD_GIVEN_UP_MOUNTS_H

#include <stddef.h>
#include <sys/types.h>

#include "core/user_budgets.h"
#include "util/result.h"

#define GIVEN_UP_MOUNTS_PER_USER 4

/* deadline_call(call, late, release, arg) for uid (deadline_call.h: 1 in
 * time, 0 given up on). -1: nothing ran, why says why, *res is
 * RESULT_USER_ERROR when uid got no place, else RESULT_NODE_ERROR. */
int given_up_mounts_call(uid_t uid, void (*call)(void *arg), void (*late)(void *arg),
			 void (*release)(void *arg), void *arg, long long deadline_ms, enum result *res,
			 char *why, size_t whylen);

/* "mounts given up on" per user with any, against GIVEN_UP_MOUNTS_PER_USER
 * (core/user_budgets.h). */
void given_up_mounts_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
				 user_budget_emit emit, void *arg);

#endif

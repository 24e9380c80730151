#include "config.h"
#include "core/given_up_mounts.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "util/deadline_call.h"

int given_up_mounts_call(uid_t uid, void (*call)(void *arg), void (*late)(void *arg),
			 void (*release)(void *arg), void *arg, long long deadline_ms, enum result *res,
			 char *why, size_t whylen)
{
	/* root's requests are the admin's and the prolog's own: no bound. */
	unsigned limit = uid == 0 ? 0 : GIVEN_UP_MOUNTS_PER_USER;
	/* A second at least: readers are killed for silence, not for a late
	 * request. */
	long long floor_ms = squash_now_ms() + 1000;
	int done = deadline_call((unsigned)uid, limit, call, late, release, arg,
				 deadline_ms > floor_ms ? deadline_ms : floor_ms);

	if (done >= 0)
		return done;
	if (errno == EBUSY) {
		unsigned given_up = deadline_calls_given_up((unsigned)uid);
		*res = RESULT_USER_ERROR;
		if (given_up >= limit)
			snprintf(why, whylen, "squashd still waits on %u earlier mounts over your FUSE servers "
				 "(squash-reader) that did not answer (stopped or hung), the most one user may "
				 "leave; new ones are refused until those end (let your squash-reader "
				 "processes run)", given_up);
		else
			snprintf(why, whylen, "squashd was still making %u mounts over your FUSE servers "
				 "(squash-reader) at this request's deadline, %u of them given up on because they "
				 "did not answer, and makes at most %u at once for one user (let your "
				 "squash-reader processes run)", deadline_calls_running((unsigned)uid), given_up,
				 limit);
	} else {
		*res = RESULT_NODE_ERROR;
		snprintf(why, whylen, "cannot start a thread for the mount: %s", strerror(errno));
	}
	return -1;
}

void given_up_mounts_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
				 user_budget_emit emit, void *arg)
{
	struct deadline_owner_use use[64];
	size_t n = deadline_calls_given_up_each(use, sizeof(use) / sizeof(use[0]));

	(void)ds;
	(void)cfg;
	for (size_t i = 0; i < n; i++)
		emit(arg, (uid_t)use[i].owner, "mounts given up on", use[i].given_up,
		     use[i].owner == 0 ? 0 : GIVEN_UP_MOUNTS_PER_USER);
}

/* Requests read and waiting for a worker, queued per user they work for
 * (issue 37). A request counts for the job's user when root (slurmd's
 * prolog and epilog, slurmstepd) asks about a job, for the peer
 * otherwise; root's own requests (status, gc, list from root) work for
 * no user (uid 0). A queued request holds no thread: only its connection
 * and its frame. The main loop starts a worker for the next request as
 * long as the pool has room: root's own first (a share of the pool is
 * theirs alone), then the users in turn (round robin), each at most
 * max_requests_per_user at once, so one user's hung requests cannot
 * hold more than that many threads nor delay another user's. */
#ifndef SQUASHD_USER_QUEUES_H
#define SQUASHD_USER_QUEUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/daemon.h"
#include "core/user_budgets.h"
#include "util/peer.h"

/* Worker threads at most; users' requests together leave the last
 * ROOT_WORKERS to root's own. */
#define MAX_WORKERS 512
#define ROOT_WORKERS 32

struct parked {
	int fd;
	struct peer peer;
	uid_t uid;             /* works for; 0: nobody */
	long long deadline_ms; /* monotonic: refused when still queued then */
	bool first;            /* an epilog's release: ahead of the user's other waiting requests */
	struct parked *next;
	size_t len;
	uint8_t frame[];
};

/* Queues p (main thread), behind the user's waiting requests, or when
 * p->first behind only their other firsts. False when uid has max_queued requests waiting
 * beyond the max_running it may run (p stays the caller's); *running and
 * *queued get uid's counts. */
bool user_queue_push(struct parked *p, unsigned max_running, unsigned max_queued, unsigned *running,
		     unsigned *queued);

/* The next request to start, counted as running (main thread); NULL when
 * none may start now. */
struct parked *user_queue_next(unsigned max_running);

/* A request of uid that user_queue_next gave is done (any thread). */
void user_queue_done(uid_t uid);

/* A queued request whose deadline passed by now_ms (every one when
 * now_ms < 0), taken off its queue, with *running its user's count; NULL
 * when none. */
struct parked *user_queue_expired(long long now_ms, unsigned *running);

/* The earliest deadline of a queued request; -1 when none waits. */
long long user_queue_next_deadline(void);

/* Requests running (started, not done). */
unsigned user_queue_running(void);

/* Status rows: "requests running" and "requests queued" per user. */
void user_queue_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
			    user_budget_emit emit, void *arg);

#endif

/* squashd's per-user request queues (daemon/server/user_queues.c): a user
 * runs at most max_running at once, waits beyond that up to max_queued,
 * users take turns, root's own requests go first and keep the pool's last
 * ROOT_WORKERS threads, queued requests expire at their deadline, and an
 * epilog's release waits ahead of the user's other waiting requests. */
#include "config.h"

#include <stdlib.h>

#include "server/user_queues.h"
#include "unit.h"

static struct parked *req(uid_t uid, long long deadline_ms)
{
	struct parked *p = calloc(1, sizeof(*p));

	p->fd = -1;
	p->uid = uid;
	p->deadline_ms = deadline_ms;
	return p;
}

static bool push(uid_t uid, unsigned max_running, unsigned max_queued)
{
	unsigned running, queued;
	struct parked *p = req(uid, 1000);
	bool ok = user_queue_push(p, max_running, max_queued, &running, &queued);

	if (!ok)
		free(p);
	return ok;
}

/* Starts what may start; returns how many, and the uid of each in order. */
static size_t start_all(unsigned max_running, uid_t *order, size_t cap)
{
	struct parked *p;
	size_t n = 0;

	while ((p = user_queue_next(max_running))) {
		if (n < cap)
			order[n] = p->uid;
		n++;
		free(p);
	}
	return n;
}

int main(void)
{
	uid_t order[MAX_WORKERS];

	/* User 1000: 2 at once, 3 waiting beyond; the 6th is refused. */
	for (int i = 0; i < 5; i++)
		CHECK(push(1000, 2, 3));
	CHECK(!push(1000, 2, 3));
	CHECK_INT(start_all(2, order, MAX_WORKERS), 2);
	CHECK_INT(user_queue_running(), 2);
	CHECK(!push(1000, 2, 3)); /* still 3 waiting behind the 2 at work */

	/* Another user and root's own start at once; root's first. */
	CHECK(push(2000, 2, 3));
	CHECK(push(0, 2, 3));
	CHECK_INT(start_all(2, order, MAX_WORKERS), 2);
	CHECK_INT(order[0], 0);
	CHECK_INT(order[1], 2000);

	/* One of 1000's ends: the next of theirs starts. */
	user_queue_done(1000);
	CHECK_INT(start_all(2, order, MAX_WORKERS), 1);
	CHECK_INT(order[0], 1000);

	/* Queued ones expire at their deadline, with the user's count. */
	unsigned running = 0;
	CHECK(user_queue_expired(999, &running) == NULL);
	CHECK_INT(user_queue_next_deadline(), 1000);
	struct parked *p = user_queue_expired(1000, &running);
	CHECK(p != NULL && p->uid == 1000);
	CHECK_INT(running, 2);
	free(p);
	while ((p = user_queue_expired(-1, &running)))
		free(p);
	CHECK_INT(user_queue_next_deadline(), -1);
	user_queue_done(1000);
	user_queue_done(1000);
	user_queue_done(2000);
	user_queue_done(0);
	CHECK_INT(user_queue_running(), 0);

	/* User 3000 keeps their one slot busy with 2 waiting; two releases
	 * of their jobs (root's epilogs) start next, in their order, before
	 * the requests that waited longer. */
	CHECK(push(3000, 1, 2));
	CHECK(push(3000, 1, 2));
	CHECK(push(3000, 1, 2));
	CHECK_INT(start_all(1, order, MAX_WORKERS), 1);
	for (int i = 0; i < 2; i++) {
		unsigned run_now, queued;
		p = req(3000, 1000);
		p->first = true;
		p->fd = 100 + i;
		CHECK(user_queue_push(p, 1, MAX_WORKERS, &run_now, &queued)); /* past max_queued */
	}
	int fds[4];
	for (int i = 0; i < 4; i++) {
		user_queue_done(3000);
		p = user_queue_next(1);
		CHECK(p != NULL);
		fds[i] = p ? p->fd : 0;
		free(p);
	}
	CHECK_INT(fds[0], 100);
	CHECK_INT(fds[1], 101);
	CHECK_INT(fds[2], -1);
	CHECK_INT(fds[3], -1);
	user_queue_done(3000);
	CHECK_INT(user_queue_running(), 0);

	/* No per-user limit: users together stop ROOT_WORKERS short of the
	 * pool, taking turns; root's own still start. */
	for (unsigned i = 0; i < MAX_WORKERS; i++)
		CHECK(push(1000 + i % 2, 0, MAX_WORKERS));
	size_t n = start_all(0, order, MAX_WORKERS);
	CHECK_INT(n, MAX_WORKERS - ROOT_WORKERS);
	CHECK_INT(order[0] != order[1], 1);
	CHECK_INT(order[2], order[0]);
	CHECK(push(0, 0, 0));
	CHECK_INT(start_all(0, order, MAX_WORKERS), 1);
	CHECK_INT(order[0], 0);
	while ((p = user_queue_expired(-1, &running)))
		free(p);
	return unit_exit_code();
}

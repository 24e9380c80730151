/* One user's budget of mounts a request gave up on (daemon/core/
 * given_up_mounts.c over daemon/util/deadline_call.c), with calls that
 * wait on a pipe as a stopped reader's mount waits on its FUSE server:
 * a call past its deadline keeps running and counts for its user until
 * it returns; then its late and release functions run and it no longer
 * counts. A user with GIVEN_UP_MOUNTS_PER_USER such calls gets no new one
 * (a user error naming why), another user and root still do; and a
 * user's calls at once never pass it: one more waits for a place until
 * its deadline. No root needed. */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "core/given_up_mounts.h"
#include "util/deadline_call.h"
#include "unit.h"

struct waiting {
	int fd;     /* read end: the call returns once a byte comes */
	bool late_ran;
};

static atomic_int released;

static void wait_for_byte(void *arg)
{
	struct waiting *w = arg;
	char c;

	(void)!read(w->fd, &c, 1);
}

static void late(void *arg)
{
	((struct waiting *)arg)->late_ran = true;
}

static void release(void *arg)
{
	struct waiting *w = arg;

	if (w->late_ran)
		atomic_fetch_add(&released, 1);
	free(w);
}

static void no_wait(void *arg)
{
	(void)arg;
}

/* Starts a call for uid that waits on a pipe, due in 50 ms. */
static int call_waiting(uid_t uid, int pipe_out[2], enum result *res, char *why, size_t whylen)
{
	struct waiting *w = calloc(1, sizeof(*w));

	if (!w || pipe(pipe_out) < 0)
		return -2;
	w->fd = pipe_out[0];
	int done = given_up_mounts_call(uid, wait_for_byte, late, release, w, squash_now_ms() + 50, res, why,
					whylen);
	if (done < 0)
		free(w);
	return done;
}

static bool wait_given_up(unsigned owner, unsigned n)
{
	for (int i = 0; i < 500; i++) {
		if (deadline_calls_given_up(owner) == n)
			return true;
		poll(NULL, 0, 10);
	}
	return false;
}

static void a_users_calls_given_up_on_are_bounded_until_they_return(void)
{
	int pipes[GIVEN_UP_MOUNTS_PER_USER + 2][2];
	enum result res = RESULT_OK;
	char why[512] = "";

	/* The deadline is a second away at least: each of these waits that. */
	for (int i = 0; i < GIVEN_UP_MOUNTS_PER_USER; i++)
		CHECK_INT(call_waiting(1000, pipes[i], &res, why, sizeof(why)), 0);
	CHECK_INT(deadline_calls_given_up(1000), GIVEN_UP_MOUNTS_PER_USER);

	/* The user's next one is refused at once, nothing started. */
	int spare[2];
	long long t = squash_now_ms();
	CHECK_INT(call_waiting(1000, spare, &res, why, sizeof(why)), -1);
	CHECK(squash_now_ms() - t < 500);
	CHECK_INT(res, RESULT_USER_ERROR);
	CHECK_CONTAINS(why, "squashd still waits on 4 earlier mounts over your FUSE servers");
	close(spare[0]);
	close(spare[1]);

	/* Another user's call and root's still run, and in time. */
	struct waiting *w = calloc(1, sizeof(*w));
	CHECK_INT(given_up_mounts_call(1001, no_wait, late, release, w, squash_now_ms() + 5000, &res, why,
				       sizeof(why)), 1);
	free(w);
	CHECK_INT(call_waiting(0, pipes[GIVEN_UP_MOUNTS_PER_USER], &res, why, sizeof(why)), 0);
	CHECK_INT(deadline_calls_given_up(0), 1);

	/* The status rows: one per user with calls given up on. */
	struct deadline_owner_use use[4];
	size_t n = deadline_calls_given_up_each(use, 4);
	CHECK_INT(n, 2);
	for (size_t i = 0; i < n; i++)
		CHECK_INT(use[i].given_up, use[i].owner == 1000 ? GIVEN_UP_MOUNTS_PER_USER : 1);

	/* One returns (the server answered): its late and release run, and
	 * the user may start one again. */
	CHECK_INT(write(pipes[0][1], "x", 1), 1);
	CHECK(wait_given_up(1000, GIVEN_UP_MOUNTS_PER_USER - 1));
	CHECK_INT(atomic_load(&released), 1);
	w = calloc(1, sizeof(*w));
	CHECK_INT(given_up_mounts_call(1000, no_wait, late, release, w, squash_now_ms() + 5000, &res, why,
				       sizeof(why)), 1);
	free(w);

	/* The rest return: nothing counts any more. */
	for (int i = 1; i <= GIVEN_UP_MOUNTS_PER_USER; i++)
		CHECK_INT(write(pipes[i][1], "x", 1), 1);
	CHECK(wait_given_up(1000, 0));
	CHECK(wait_given_up(0, 0));
	CHECK_INT(deadline_calls_given_up_each(use, 4), 0);
	for (int i = 0; i <= GIVEN_UP_MOUNTS_PER_USER; i++) {
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
	for (int i = 0; i < 100 && atomic_load(&released) < GIVEN_UP_MOUNTS_PER_USER + 1; i++)
		poll(NULL, 0, 10);
	CHECK_INT(atomic_load(&released), GIVEN_UP_MOUNTS_PER_USER + 1);
}

struct in_flight {
	pthread_t thread;
	int pipe[2];
	int done;
};

static void *call_in_flight(void *arg)
{
	struct in_flight *f = arg;
	struct waiting *w = calloc(1, sizeof(*w));
	enum result res;
	char why[512];

	w->fd = f->pipe[0];
	f->done = given_up_mounts_call(1000, wait_for_byte, late, release, w, squash_now_ms() + 20000, &res,
				       why, sizeof(why));
	if (f->done == 1)
		free(w);
	return NULL;
}

static void a_users_calls_at_once_never_pass_the_bound(void)
{
	struct in_flight f[GIVEN_UP_MOUNTS_PER_USER];
	enum result res = RESULT_OK;
	char why[512] = "";

	for (int i = 0; i < GIVEN_UP_MOUNTS_PER_USER; i++) {
		CHECK_INT(pipe(f[i].pipe), 0);
		pthread_create(&f[i].thread, NULL, call_in_flight, &f[i]);
	}
	for (int i = 0; i < 500 && deadline_calls_running(1000) < GIVEN_UP_MOUNTS_PER_USER; i++)
		poll(NULL, 0, 10);
	CHECK_INT(deadline_calls_running(1000), GIVEN_UP_MOUNTS_PER_USER);
	CHECK_INT(deadline_calls_given_up(1000), 0);

	/* In flight, not given up on: one more waits for a place until its
	 * deadline (a second at least), and no thread starts meanwhile. */
	struct waiting *w = calloc(1, sizeof(*w));
	long long t = squash_now_ms();
	CHECK_INT(given_up_mounts_call(1000, no_wait, late, release, w, t + 200, &res, why, sizeof(why)), -1);
	CHECK(squash_now_ms() - t >= 900);
	CHECK_INT(res, RESULT_USER_ERROR);
	CHECK_CONTAINS(why, "squashd was still making 4 mounts over your FUSE servers (squash-reader) at "
		       "this request's deadline, 0 of them given up on");
	CHECK_INT(deadline_calls_running(1000), GIVEN_UP_MOUNTS_PER_USER);

	/* A place that frees before the deadline is taken. */
	CHECK_INT(write(f[0].pipe[1], "x", 1), 1);
	CHECK_INT(given_up_mounts_call(1000, no_wait, late, release, w, squash_now_ms() + 5000, &res, why,
				       sizeof(why)), 1);
	free(w);
	for (int i = 1; i < GIVEN_UP_MOUNTS_PER_USER; i++)
		CHECK_INT(write(f[i].pipe[1], "x", 1), 1);
	for (int i = 0; i < GIVEN_UP_MOUNTS_PER_USER; i++) {
		pthread_join(f[i].thread, NULL);
		CHECK_INT(f[i].done, 1);
		close(f[i].pipe[0]);
		close(f[i].pipe[1]);
	}
	CHECK_INT(deadline_calls_running(1000), 0);
}

int main(void)
{
	a_users_calls_given_up_on_are_bounded_until_they_return();
	a_users_calls_at_once_never_pass_the_bound();
	return unit_exit_code();
}

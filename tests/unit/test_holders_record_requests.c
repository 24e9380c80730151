/* What the request handlers ask of the core's holders
 * (daemon/core/holders.h), on a registry with no real mounts: a new job,
 * step or session is pending until its request settles; a failed job
 * lets go of its mounts and keeps its reason; sessions count per user;
 * walking the holders goes through jobs, then steps and sessions, and
 * only those that use a given mount. No root needed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/daemon.h"
#include "core/holders.h"
#include "core/sharing.h"
#include "clock.h"
#include "core_fixture.h"
#include "unit.h"

static char dir[] = "/tmp/test_holders.XXXXXX";
static struct squashd_config *cfg;
static struct daemon_state ds;

static struct mount_entry *ready_mount(unsigned ino)
{
	struct mount_key k = { .dev = 1, .ino = ino, .mode = SQUASH__MOUNT_MODE__KERNEL,
			       .owner_uid = MOUNT_OWNER_ANY };
	struct mount_entry *m = registry_new_mount(&ds.registry, &k, "/img.sqfs", ds.mount_dir);

	m->state = MOUNT_READY;
	return m;
}

static void a_new_job_is_pending_until_its_request_settles(void)
{
	struct job_entry *job = LOCKED(&ds, holders_add_job_locked(&ds, 60, 1000));

	CHECK(job != NULL);
	CHECK(LOCKED(&ds, holders_find_job_locked(&ds, 60)) == job);
	CHECK(job->pending);
	CHECK_INT(job->uid, 1000);
	LOCKED_DO(&ds, holders_settle_locked(&ds, job));
	CHECK(!job->pending);
	CHECK(LOCKED(&ds, holders_settled_job_locked(&ds, 60, 0, 0)) == job);
	CHECK(LOCKED(&ds, holders_find_job_locked(&ds, 61)) == NULL);
	struct teardown td = TEARDOWN_INIT(cfg);
	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 60, &td)), HOLDER_RELEASED);
}

/* A user asking about another user's pending job neither waits for it
 * nor learns it exists; its owner waits until the deadline. */
static void another_users_pending_job_is_not_there_at_once(void)
{
	struct job_entry *job = LOCKED(&ds, holders_add_job_locked(&ds, 64, 1000));
	struct job_entry *step = LOCKED(&ds, holders_add_step_locked(&ds, 64, 1, 1000, 4243, 99));
	long long start = squash_now_ms();

	CHECK(job && step);
	CHECK(LOCKED(&ds, holders_settled_job_locked(&ds, 64, 1001, start + 5000)) == NULL);
	CHECK(LOCKED(&ds, holders_settled_step_locked(&ds, 64, 1, 1001, start + 5000)) == NULL);
	CHECK(squash_now_ms() - start < 1000);
	/* Its owner (and root) wait for it: still pending at the deadline. */
	CHECK(LOCKED(&ds, holders_settled_job_locked(&ds, 64, 1000, squash_now_ms() + 200)) == job);
	CHECK(LOCKED(&ds, holders_settled_step_locked(&ds, 64, 1, 0, squash_now_ms() + 200)) == step);
	CHECK(squash_now_ms() - start >= 400);
	CHECK(job->pending && step->pending);
	LOCKED_DO(&ds, holders_settle_locked(&ds, job));
	LOCKED_DO(&ds, holders_settle_locked(&ds, step));
	struct teardown td = TEARDOWN_INIT(cfg);
	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 64, &td)), HOLDER_RELEASED);
}

static void a_failed_job_lets_go_of_its_mounts_and_keeps_why(void)
{
	struct teardown td = TEARDOWN_INIT(cfg);
	struct mount_entry *m = ready_mount(10);
	struct job_entry *job = LOCKED(&ds, holders_add_job_locked(&ds, 62, 1000));

	registry_job_add_image(job, "/a", "/squash/a", m);
	m->refcount = 1;
	LOCKED_DO(&ds, holders_settle_locked(&ds, job));
	LOCKED_DO(&ds, holders_fail_job_locked(&ds, job, SQUASH__STATUS__USER_ERROR, "image /a: not squashfs", &td));
	CHECK(LOCKED(&ds, holders_find_job_locked(&ds, 62)) == job);
	CHECK_INT(job->status, SQUASH__STATUS__USER_ERROR);
	CHECK_STR(job->message, "image /a: not squashfs");
	CHECK(job->images[0].mount == NULL);
	CHECK_INT(m->refcount, 0);
	CHECK_INT(m->state, MOUNT_UNMOUNTING);
	CHECK(td.head == m);
	/* Its release then forgets it without touching the mount again. */
	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 62, &td)), HOLDER_RELEASED);
	CHECK(LOCKED(&ds, holders_find_job_locked(&ds, 62)) == NULL);
	registry_remove_mount(&ds.registry, m);
}

static void steps_and_sessions_are_pending_and_record_who_asked(void)
{
	struct job_entry *step = LOCKED(&ds, holders_add_step_locked(&ds, 63, 4, 1000, 4242, 99));
	struct job_entry *s1 = LOCKED(&ds, holders_add_session_locked(&ds, 1000, 5001, 7));
	struct job_entry *s2 = LOCKED(&ds, holders_add_session_locked(&ds, 1000, 5002, 8));
	struct job_entry *s3 = LOCKED(&ds, holders_add_session_locked(&ds, 1001, 5003, 9));

	CHECK(step && s1 && s2 && s3);
	CHECK(LOCKED(&ds, holders_find_step_locked(&ds, 63, 4)) == step);
	CHECK(LOCKED(&ds, holders_find_step_locked(&ds, 63, 5)) == NULL);
	CHECK(step->pending);
	CHECK_INT(step->kind, HOLDER_STEP);
	CHECK_INT(step->session_pid, 4242);
	CHECK_INT(step->session_start, 99);
	CHECK(LOCKED(&ds, holders_find_session_locked(&ds, 5002)) == s2);
	CHECK(LOCKED(&ds, holders_find_session_locked(&ds, 5009)) == NULL);
	CHECK(s2->pending);
	CHECK_INT(s2->kind, HOLDER_SESSION);
	CHECK_INT(s2->session_start, 8);
	CHECK_INT(LOCKED(&ds, holders_sessions_of_locked(&ds, 1000)), 2);
	CHECK_INT(LOCKED(&ds, holders_sessions_of_locked(&ds, 1001)), 1);
	CHECK_INT(LOCKED(&ds, holders_sessions_of_locked(&ds, 1002)), 0);
	struct teardown td = TEARDOWN_INIT(cfg);
	LOCKED_DO(&ds, holders_drop_locked(&ds, step, &td));
	LOCKED_DO(&ds, holders_drop_locked(&ds, s1, &td));
	LOCKED_DO(&ds, holders_drop_locked(&ds, s2, &td));
	LOCKED_DO(&ds, holders_drop_locked(&ds, s3, &td));
	CHECK_INT(LOCKED(&ds, holders_sessions_of_locked(&ds, 1000)), 0);
}

static void walking_the_holders_takes_jobs_then_steps_and_sessions(void)
{
	struct mount_entry *m = ready_mount(11), *other = ready_mount(12);
	const struct job_entry *e;
	struct job_entry *j1 = LOCKED(&ds, holders_add_job_locked(&ds, 70, 1000));
	struct job_entry *j2 = LOCKED(&ds, holders_add_job_locked(&ds, 71, 1000));
	struct job_entry *st = LOCKED(&ds, holders_add_step_locked(&ds, 70, 1, 1000, 1, 0));
	struct job_entry *se = LOCKED(&ds, holders_add_session_locked(&ds, 1000, 6000, 1));
	size_t n = 0, jobs = 0;

	registry_job_add_image(j2, "/a", "/squash/a", m);
	registry_job_add_image(j1, "/b", "/squash/b", other);
	registry_job_add_image(se, "/a", "/squash/a", m);
	for (e = LOCKED(&ds, holders_next_locked(&ds, NULL, NULL)); e; e = LOCKED(&ds, holders_next_locked(&ds, e, NULL))) {
		jobs += e->kind == HOLDER_JOB;
		CHECK(n < 4);
		/* Every job comes before every step and session. */
		CHECK(e->kind != HOLDER_JOB || jobs == n + 1);
		n++;
	}
	CHECK_INT(n, 4);
	CHECK_INT(jobs, 2);
	/* Only the holders of m, whichever list they are on. */
	e = LOCKED(&ds, holders_next_locked(&ds, NULL, m));
	CHECK(e == j2);
	e = LOCKED(&ds, holders_next_locked(&ds, e, m));
	CHECK(e == se);
	CHECK(LOCKED(&ds, holders_next_locked(&ds, e, m)) == NULL);
	/* A mount nobody uses has no holders; neither has an empty registry. */
	struct mount_entry *unused = ready_mount(13);
	CHECK(LOCKED(&ds, holders_next_locked(&ds, NULL, unused)) == NULL);
	n = 0;
	for (const struct mount_entry *x = LOCKED(&ds, sharing_next_mount_locked(&ds, NULL)); x;
	     x = LOCKED(&ds, sharing_next_mount_locked(&ds, x)))
		n++;
	CHECK_INT(n, 3);
	struct teardown td = TEARDOWN_INIT(cfg);
	LOCKED_DO(&ds, holders_drop_locked(&ds, j1, &td));
	LOCKED_DO(&ds, holders_drop_locked(&ds, j2, &td));
	LOCKED_DO(&ds, holders_drop_locked(&ds, st, &td));
	LOCKED_DO(&ds, holders_drop_locked(&ds, se, &td));
	CHECK(LOCKED(&ds, holders_next_locked(&ds, NULL, NULL)) == NULL);
	/* Only steps and sessions left: the walk starts on them. */
	se = LOCKED(&ds, holders_add_session_locked(&ds, 1000, 6001, 1));
	CHECK(LOCKED(&ds, holders_next_locked(&ds, NULL, NULL)) == se);
	LOCKED_DO(&ds, holders_drop_locked(&ds, se, &td));
	registry_remove_mount(&ds.registry, m);
	registry_remove_mount(&ds.registry, other);
	registry_remove_mount(&ds.registry, unused);
}

int main(void)
{
	if (core_fixture_start(dir, &cfg, &ds) < 0)
		return 1;
	a_new_job_is_pending_until_its_request_settles();
	another_users_pending_job_is_not_there_at_once();
	a_failed_job_lets_go_of_its_mounts_and_keeps_why();
	steps_and_sessions_are_pending_and_record_who_asked();
	walking_the_holders_takes_jobs_then_steps_and_sessions();
	core_fixture_stop(dir, cfg, &ds);
	return unit_exit_code();
}

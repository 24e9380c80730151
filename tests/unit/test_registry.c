/* squashd's registry (daemon/registry/registry.h) and a mount's linger
 * state (daemon/registry/linger.h): what can be shared, how holders are
 * kept and found, and when a lingering mount expires. No root needed. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "registry/linger.h"
#include "registry/registry.h"
#include "settings/settings.h"
#include "unit.h"

static struct mount_key key_of(unsigned ino, uid_t owner)
{
	return (struct mount_key){ .dev = 8, .ino = ino, .size = 4096, .mtime_sec = 1,
				   .mode = owner == MOUNT_OWNER_ANY ? SQUASH__MOUNT_MODE__KERNEL
								    : SQUASH__MOUNT_MODE__FUSE,
				   .owner_uid = owner };
}

static void a_mount_is_shared_only_while_mounting_ready_or_lingering(void)
{
	struct registry r = { 0 };
	struct mount_key k = key_of(1, MOUNT_OWNER_ANY);
	struct mount_entry *m = registry_new_mount(&r, &k, "/img.sqfs", "/run/squashd/mnt");

	CHECK(m != NULL);
	CHECK_STR(m->mount_point, "/run/squashd/mnt/m1");
	CHECK_INT(m->state, MOUNT_MOUNTING);
	CHECK(registry_find_mount(&r, &k) == m);
	m->state = MOUNT_READY;
	CHECK(registry_find_mount(&r, &k) == m);
	m->state = MOUNT_LINGERING;
	CHECK(registry_find_mount(&r, &k) == m);
	for (enum mount_state s = MOUNT_FAILED; s <= MOUNT_UNMOUNTING; s++) {
		m->state = s;
		CHECK(registry_find_mount(&r, &k) == NULL);
	}
	registry_free(&r);
}

static void a_fuse_mount_is_shared_only_with_its_own_user(void)
{
	struct registry r = { 0 };
	struct mount_key mine = key_of(1, 1000), theirs = key_of(1, 1001);
	struct mount_entry *m = registry_new_mount(&r, &mine, "/img.sqfs", "/mnt");

	m->state = MOUNT_READY;
	CHECK(registry_find_mount(&r, &mine) == m);
	CHECK(registry_find_mount(&r, &theirs) == NULL);
	/* A rewritten image (another mtime) is another mount. */
	mine.mtime_sec = 2;
	CHECK(registry_find_mount(&r, &mine) == NULL);
	registry_free(&r);
}

static void mount_ids_stay_unique_and_name_the_mount_point(void)
{
	struct registry r = { 0 };
	struct mount_key a = key_of(1, MOUNT_OWNER_ANY), b = key_of(2, MOUNT_OWNER_ANY);
	struct mount_entry *m1 = registry_new_mount(&r, &a, "/a", "/mnt");
	struct mount_entry *m2 = registry_new_mount(&r, &b, "/b", "/mnt");

	CHECK(m1->id != m2->id);
	CHECK_STR(m2->mount_point, "/mnt/m2");
	CHECK(registry_mount_by_id(&r, m1->id) == m1);
	registry_remove_mount(&r, m1);
	CHECK(registry_mount_by_id(&r, 1) == NULL);
	struct mount_entry *m3 = registry_new_mount(&r, &a, "/a", "/mnt");
	CHECK_STR(m3->mount_point, "/mnt/m3");
	registry_free(&r);
}

static void jobs_steps_and_sessions_are_found_by_their_own_keys(void)
{
	struct registry r = { 0 };
	struct job_entry *job = registry_add_job(&r, 12, 1000);
	struct job_entry *step = registry_add_scoped(&r, HOLDER_STEP, 12, 3, 1000);
	struct job_entry *session = registry_add_scoped(&r, HOLDER_SESSION, 0, 0, 1000);

	session->session_pid = 4242;
	CHECK(registry_find_job(&r, 12) == job);
	CHECK(registry_find_job(&r, 13) == NULL);
	CHECK(registry_find_step(&r, 12, 3) == step);
	CHECK(registry_find_step(&r, 12, 4) == NULL);
	CHECK(registry_find_session(&r, 4242) == session);
	CHECK(registry_find_session(&r, 12) == NULL);
	CHECK_INT(job->status, SQUASH__STATUS__OK);
	registry_remove_scoped(&r, step);
	CHECK(registry_find_step(&r, 12, 3) == NULL);
	registry_free(&r);
	CHECK(r.jobs == NULL && r.scoped == NULL && r.mounts == NULL);
}

static void a_job_holds_at_most_the_image_limit_and_knows_what_it_uses(void)
{
	struct registry r = { 0 };
	struct mount_key k = key_of(1, MOUNT_OWNER_ANY);
	struct mount_entry *m = registry_new_mount(&r, &k, "/a", "/mnt");
	struct mount_entry *other = registry_new_mount(&r, &k, "/b", "/mnt");
	struct job_entry *job = registry_add_job(&r, 1, 1000);

	for (int i = 0; i < SQUASH_MAX_IMAGES; i++)
		CHECK_INT(registry_job_add_image(job, "/a", "/squash/a", m), 0);
	CHECK_INT(registry_job_add_image(job, "/a", "/squash/a", m), -1);
	CHECK_INT(job->count, SQUASH_MAX_IMAGES);
	CHECK(registry_job_uses(job, m));
	CHECK(!registry_job_uses(job, other));
	CHECK_INT(registry_job_set_failure(job, SQUASH__STATUS__USER_ERROR, "no such image"), 0);
	CHECK_STR(job->message, "no such image");
	registry_free(&r);
}

static void overlay_records_round_trip_through_the_mask(void)
{
	struct registry r = { 0 };
	struct job_entry *job = registry_add_job(&r, 7, 1000);
	char path[64];

	registry_job_add_image(job, "/a", "/squash/a", NULL);
	registry_job_add_image(job, "/b", "/squash/b", NULL);
	CHECK_INT(registry_overlay_restore(job, "/mnt/j9", 0x2), 0);
	CHECK_STR(job->images[1].overlay, "/mnt/j9/o1");
	CHECK(job->images[0].overlay == NULL);
	CHECK(job->images[1].writable);
	CHECK_INT(registry_overlay_mask(job), 0x2);
	CHECK_INT(registry_overlay_path(path, sizeof(path), "/mnt/j9", 'u', 1), 0);
	CHECK_STR(path, "/mnt/j9/u1");
	CHECK_INT(registry_overlay_path(path, 8, "/mnt/j9", 'u', 1), -1);
	/* A second record, an empty mask, a bit beyond the images: refused. */
	CHECK_INT(registry_overlay_restore(job, "/mnt/j9", 0x2), -1);
	struct job_entry *other = registry_add_job(&r, 8, 1000);
	registry_job_add_image(other, "/a", "/squash/a", NULL);
	CHECK_INT(registry_overlay_restore(other, "/mnt/j10", 0), -1);
	CHECK_INT(registry_overlay_restore(other, "/mnt/j10", 0x4), -1);
	registry_free(&r);
}

static void a_lingering_mount_expires_after_its_seconds(void)
{
	struct registry r = { 0 };
	struct mount_key k = key_of(1, MOUNT_OWNER_ANY), k2 = key_of(2, MOUNT_OWNER_ANY);
	struct mount_entry *m = registry_new_mount(&r, &k, "/a", "/mnt");
	struct mount_entry *later = registry_new_mount(&r, &k2, "/b", "/mnt");
	struct mount_entry *expired = NULL;

	m->state = later->state = MOUNT_READY;
	CHECK(!linger_begin(m, 0, 1000)); /* linger off */
	CHECK_INT(m->state, MOUNT_READY);
	CHECK(linger_begin(m, 10, 1000));
	CHECK(linger_begin(later, 30, 1000));
	CHECK_INT(m->state, MOUNT_LINGERING);
	CHECK_INT(linger_left_s(m, 1000), 10);
	CHECK_INT(linger_left_s(m, 10500), 1); /* rounded up */
	CHECK_INT(linger_left_s(m, 11000), 0);
	/* Not yet: nothing collected, the earliest expiry named. */
	CHECK_INT(linger_collect(&r, false, 5000, &expired), 11000);
	CHECK(expired == NULL);
	/* Expired: m is torn down, the other lingers on. */
	CHECK_INT(linger_collect(&r, false, 11000, &expired), 31000);
	CHECK(expired == m && m->teardown_next == NULL);
	CHECK_INT(m->state, MOUNT_UNMOUNTING);
	CHECK_INT(later->state, MOUNT_LINGERING);
	/* Stopping ends every linger. */
	expired = NULL;
	CHECK_INT(linger_collect(&r, true, 11000, &expired), 0);
	CHECK(expired == later);
	registry_free(&r);
}

static void a_new_holder_takes_a_lingering_mount_over(void)
{
	struct registry r = { 0 };
	struct mount_key k = key_of(1, MOUNT_OWNER_ANY);
	struct mount_entry *m = registry_new_mount(&r, &k, "/a", "/mnt");

	m->state = MOUNT_READY;
	linger_begin(m, 60, 0);
	linger_take_over(m, 1000);
	CHECK_INT(m->state, MOUNT_READY);
	CHECK_INT(linger_left_s(m, 1000), 0);
	registry_free(&r);
}

static void a_linger_survives_a_restart_as_wall_clock_time(void)
{
	struct registry r = { 0 };
	struct mount_key k = key_of(1, MOUNT_OWNER_ANY);
	struct mount_entry *m = registry_new_mount(&r, &k, "/a", "/mnt");

	m->state = MOUNT_READY;
	linger_begin(m, 100, 5000);
	/* Saved at monotonic 5000 ms = wall 1,000,000 s: expires at +100 s. */
	CHECK_INT(linger_expiry_wall(m, 5000, 1000000), 1000100);
	/* Read back 40 s later by a squashd whose monotonic clock is at 0. */
	linger_restore(m, 1000100, 0, 1000040);
	CHECK_INT(m->state, MOUNT_LINGERING);
	CHECK_INT(linger_left_s(m, 0), 60);
	/* A wall clock set back cannot stretch it beyond the maximum. */
	linger_restore(m, 1000100 + 10 * SQUASHD_LINGER_MAX_S, 0, 1000000);
	CHECK_INT(linger_left_s(m, 0), SQUASHD_LINGER_MAX_S);
	/* Already past: expires at once. */
	linger_restore(m, 1000000, 0, 1000100);
	CHECK_INT(linger_left_s(m, 0), 0);
	registry_free(&r);
}

int main(void)
{
	a_mount_is_shared_only_while_mounting_ready_or_lingering();
	a_fuse_mount_is_shared_only_with_its_own_user();
	mount_ids_stay_unique_and_name_the_mount_point();
	jobs_steps_and_sessions_are_found_by_their_own_keys();
	a_job_holds_at_most_the_image_limit_and_knows_what_it_uses();
	overlay_records_round_trip_through_the_mask();
	a_lingering_mount_expires_after_its_seconds();
	a_new_holder_takes_a_lingering_mount_over();
	a_linger_survives_a_restart_as_wall_clock_time();
	return unit_exit_code();
}

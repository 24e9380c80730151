/* squashd's registry (daemon/registry/registry.h): what can be shared,
 * how holders are kept and found, how overlays are recorded. No root
 * needed. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"
#include "registry/state_file.h"
#include "registry/usage.h"
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
	/* A second record, a bit beyond the images: refused; an empty mask
	 * (the job's overlay directory, no overlay in it yet): kept. */
	CHECK_INT(registry_overlay_restore(job, "/mnt/j9", 0x2), -1);
	struct job_entry *other = registry_add_job(&r, 8, 1000);
	registry_job_add_image(other, "/a", "/squash/a", NULL);
	CHECK_INT(registry_overlay_restore(other, "/mnt/j10", 0x4), -1);
	CHECK_INT(registry_overlay_restore(other, "/mnt/j10", 0), 0);
	CHECK(other->overlay_dir && !other->images[0].overlay);
	registry_free(&r);
}

/* A user's budget counts their entries and their records' bytes as
 * written (a non-ASCII byte is three), and refuses that user only. */
static void each_user_has_a_registry_budget(void)
{
	struct registry r = { 0 };
	char why[512];
	struct job_entry *a = registry_add_job(&r, 1, 1000);
	struct job_entry *step = registry_add_scoped(&r, HOLDER_STEP, 1, 0, 1000);
	registry_add_job(&r, 2, 1001);

	registry_job_add_image(a, "/i", "/t", NULL);
	struct registry_usage u = registry_user_usage(&r, 1000);
	CHECK_INT(u.entries, 2);
	CHECK_INT(u.bytes, strlen("job 1 1000 0 -\nimage 1 0 /i /t\n") + strlen("scope 1 1 0 0 0 1000 0 -\n"));
	registry_job_add_image(step, "/\xc3\xa9", "/t", NULL); /* 2 bytes, 6 written */
	CHECK_INT(registry_user_usage(&r, 1000).bytes, u.bytes + strlen("simage 0 /%C3%A9 /t\n"));
	CHECK_INT(registry_user_admit(&r, 1000, "/x", "/y", 2, 1 << 20, why, sizeof(why)), 0);
	CHECK_INT(registry_user_admit(&r, 1000, "/x", "/y", 1, 1 << 20, why, sizeof(why)), -1);
	CHECK(strstr(why, "registry_entries_per_user = 1") != NULL);
	CHECK_INT(registry_user_admit(&r, 1000, "/x", "/y", 2, 100, why, sizeof(why)), -1);
	CHECK(strstr(why, "registry_bytes_per_user = 100") != NULL);
	CHECK_INT(registry_user_admit(&r, 1001, "/x", "/y", 1, 100, why, sizeof(why)), 0); /* another user */
	/* Images added while a request is checked image by image: the count
	 * grows by each new record, as written, not formatted again. */
	CHECK_INT(registry_user_add_image(step, "/% x", "/t2", NULL), 0);
	CHECK_INT(step->state_bytes, state_file_entry_bytes(step));
	CHECK_INT(registry_user_usage(&r, 1000).bytes,
		  u.bytes + strlen("simage 0 /%C3%A9 /t\n") + strlen("simage 0 /%25%20x /t2\n"));
	registry_free(&r);
}

/* The images a user's squash-shell sessions bind are counted over all
 * of that user's sessions (not its jobs or steps, which bind nothing on
 * the node); at the budget the next bind is refused, for that user only;
 * root and a budget of 0 are not bounded. */
static void a_users_session_binds_have_a_budget(void)
{
	struct registry r = { 0 };
	char why[512];
	struct job_entry *job = registry_add_job(&r, 1, 1000);
	struct job_entry *s1 = registry_add_scoped(&r, HOLDER_SESSION, 0, 0, 1000);
	struct job_entry *s2 = registry_add_scoped(&r, HOLDER_SESSION, 0, 0, 1000);
	struct job_entry *other = registry_add_scoped(&r, HOLDER_SESSION, 0, 0, 1001);
	struct job_entry *root = registry_add_scoped(&r, HOLDER_SESSION, 0, 0, 0);

	registry_job_add_image(job, "/j1", "/t", NULL);
	registry_job_add_image(job, "/j2", "/u", NULL);
	registry_job_add_image(s1, "/a", "/t", NULL);
	registry_job_add_image(s1, "/b", "/u", NULL);
	registry_job_add_image(s2, "/c", "/t", NULL);
	registry_job_add_image(other, "/d", "/t", NULL);
	registry_job_add_image(root, "/e", "/t", NULL);
	CHECK_INT(registry_user_usage(&r, 1000).session_binds, 3);
	CHECK_INT(registry_user_admit_session_bind(&r, 1000, 4, why, sizeof(why)), 0);
	CHECK_INT(registry_user_admit_session_bind(&r, 1000, 3, why, sizeof(why)), -1);
	CHECK(strstr(why, "already bind 3 images") != NULL);
	CHECK(strstr(why, "max_session_binds_per_user = 3") != NULL);
	CHECK_INT(registry_user_admit_session_bind(&r, 1000, 0, why, sizeof(why)), 0);
	CHECK_INT(registry_user_admit_session_bind(&r, 1001, 2, why, sizeof(why)), 0);
	CHECK_INT(registry_user_admit_session_bind(&r, 1001, 1, why, sizeof(why)), -1);
	CHECK_INT(registry_user_admit_session_bind(&r, 0, 1, why, sizeof(why)), 0);
	registry_free(&r);
}

/* A user's own image mount lingers only while that user's entries and
 * lingering mounts stay within the registry budgets (a lingering mount's
 * record is saved with every save and no holder counts it); another
 * user's lingering mounts, kernel mounts and root's do not count. */
static void a_users_mounts_linger_only_within_their_registry_budget(void)
{
	struct registry r = { 0 };
	struct mount_key k1 = key_of(1, 1000), k2 = key_of(2, 1000), k3 = key_of(3, 1000);
	struct mount_key theirs = key_of(4, 1001), kernel = key_of(5, MOUNT_OWNER_ANY), root = key_of(6, 0);
	struct mount_entry *a = registry_new_mount(&r, &k1, "/img/a.sqfs", "/mnt");
	struct mount_entry *b = registry_new_mount(&r, &k2, "/img/b.sqfs", "/mnt");
	struct mount_entry *c = registry_new_mount(&r, &k3, "/img/c.sqfs", "/mnt");
	struct mount_entry *o = registry_new_mount(&r, &theirs, "/img/o.sqfs", "/mnt");
	struct mount_entry *kern = registry_new_mount(&r, &kernel, "/img/k.sqfs", "/mnt");
	struct mount_entry *rt = registry_new_mount(&r, &root, "/img/r.sqfs", "/mnt");

	registry_add_job(&r, 1, 1000);
	a->state = o->state = MOUNT_LINGERING;
	b->state = c->state = kern->state = rt->state = MOUNT_READY;
	/* Entries: the job, a, b (3); bytes: the job's record and a mount
	 * record each at its largest (96 and its paths escaped). */
	unsigned long long bytes = registry_user_usage(&r, 1000).bytes;
	for (const struct mount_entry *m = a; m; m = m == a ? b : NULL)
		bytes += 96 + STATE_FILE_ESCAPE_MAX * (strlen(m->mount_point) + strlen(m->image) +
						       strlen(m->loop_device));
	CHECK(registry_user_may_linger(&r, b, 3, 1 << 20));
	CHECK(!registry_user_may_linger(&r, b, 2, 1 << 20));
	CHECK(registry_user_may_linger(&r, b, 3, bytes));
	CHECK(!registry_user_may_linger(&r, b, 3, bytes - 1));
	b->state = MOUNT_LINGERING;
	CHECK(!registry_user_may_linger(&r, c, 3, 1 << 20)); /* a and b linger already */
	CHECK(registry_user_may_linger(&r, c, 4, 1 << 20));
	o->state = MOUNT_READY; /* another user's: not counted */
	CHECK(registry_user_may_linger(&r, c, 4, 1 << 20));
	CHECK(registry_user_may_linger(&r, kern, 0, 0));
	CHECK(registry_user_may_linger(&r, rt, 0, 0));
	registry_free(&r);
}

int main(void)
{
	a_users_session_binds_have_a_budget();
	a_mount_is_shared_only_while_mounting_ready_or_lingering();
	a_fuse_mount_is_shared_only_with_its_own_user();
	mount_ids_stay_unique_and_name_the_mount_point();
	jobs_steps_and_sessions_are_found_by_their_own_keys();
	a_job_holds_at_most_the_image_limit_and_knows_what_it_uses();
	overlay_records_round_trip_through_the_mask();
	each_user_has_a_registry_budget();
	a_users_mounts_linger_only_within_their_registry_budget();
	return unit_exit_code();
}

/* A node-level mount's linger (daemon/registry/linger.h): it starts only
 * when linger is on, expires after its seconds, is taken over by the next
 * holder, and survives a restart as wall-clock time. No root needed. */
#include "config.h"

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
	a_lingering_mount_expires_after_its_seconds();
	a_new_holder_takes_a_lingering_mount_over();
	a_linger_survives_a_restart_as_wall_clock_time();
	return unit_exit_code();
}

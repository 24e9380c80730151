/* The loop devices' limits (daemon/core/loop_devices.c), on a registry with
 * no real mounts: one user's share counts the distinct kernel mounts that
 * user's holders hold and those being made for the user, not shared ones
 * twice, not FUSE or lingering ones, not root's; the node's limit takes
 * lingering mounts' devices, as many as a mount needs, earliest expiry
 * first, and none when the mounts in use fill it alone. No root needed. */
#include "config.h"

#include <string.h>

#include "core/daemon.h"
#include "core/loop_devices.h"
#include "core_fixture.h"
#include "unit.h"

static char dir[] = "/tmp/test_loop_devices.XXXXXX";
static struct squashd_config *cfg;
static struct daemon_state ds;
static unsigned next_ino;

static struct mount_entry *mount_in(enum mount_state state, int mode)
{
	struct mount_key k = { .dev = 1, .ino = ++next_ino, .mode = mode,
			       .owner_uid = mode == SQUASH__MOUNT_MODE__FUSE ? 1000 : MOUNT_OWNER_ANY };
	struct mount_entry *m = registry_new_mount(&ds.registry, &k, "/img.sqfs", ds.mount_dir);

	m->state = state;
	return m;
}

static void forget_all(void)
{
	core_fixture_forget_all(&ds);
}

static void a_users_share_counts_distinct_kernel_mounts_they_hold_or_are_given(void)
{
	char why[512];
	struct mount_entry *a = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__KERNEL);
	struct mount_entry *b = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__KERNEL);
	struct mount_entry *fuse = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__FUSE);
	struct mount_entry *making = mount_in(MOUNT_MOUNTING, SQUASH__MOUNT_MODE__KERNEL);
	struct mount_entry *others = mount_in(MOUNT_MOUNTING, SQUASH__MOUNT_MODE__KERNEL);
	struct job_entry *job = registry_add_job(&ds.registry, 1, 1000);
	struct job_entry *again = registry_add_job(&ds.registry, 2, 1000);
	struct job_entry *session = registry_add_scoped(&ds.registry, HOLDER_SESSION, 0, 0, 1000);
	struct job_entry *root = registry_add_job(&ds.registry, 3, 0);

	making->mounting_for = 1000;
	others->mounting_for = 1001;
	registry_job_add_image(job, "/a", "/squash/a", a);
	registry_job_add_image(again, "/a", "/squash/a", a); /* shared: once */
	registry_job_add_image(session, "/b", "/squash/b", b);
	registry_job_add_image(session, "/f", "/squash/f", fuse);
	registry_job_add_image(root, "/a", "/squash/a", a);
	CHECK_INT(LOCKED(&ds, loop_devices_of_user_locked(&ds, 1000)), 3); /* a, b, making */
	CHECK_INT(LOCKED(&ds, loop_devices_of_user_locked(&ds, 1001)), 1);
	CHECK_INT(LOCKED(&ds, loop_devices_of_user_locked(&ds, 1002)), 0);

	/* Default share: a quarter of max_loop_devices, at least one; without
	 * a node limit the most images of a job (the kernel gives devices
	 * without end, each outside the user's memory cgroup); the setting
	 * wins. */
	cfg->max_loop_devices = 0;
	CHECK_INT(loop_devices_user_limit(cfg), LOOP_DEVICES_USER_DEFAULT);
	CHECK_INT(LOOP_DEVICES_USER_DEFAULT, 1024);
	CHECK(!LOCKED(&ds, loop_devices_user_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	cfg->max_loop_devices = 2;
	CHECK_INT(loop_devices_user_limit(cfg), 1);
	cfg->max_loop_devices = 16;
	CHECK_INT(loop_devices_user_limit(cfg), 4);
	CHECK(!LOCKED(&ds, loop_devices_user_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	cfg->max_loop_devices = 12;
	CHECK(LOCKED(&ds, loop_devices_user_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	CHECK(strstr(why, "the jobs and sessions of uid 1000 on this node already hold 3 kernel mounts") != NULL);
	CHECK(strstr(why, "(max_loop_devices_per_user = 3)") != NULL);
	cfg->max_loop_devices_per_user = 4;
	CHECK(!LOCKED(&ds, loop_devices_user_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	cfg->max_loop_devices_per_user = 1;
	CHECK(!LOCKED(&ds, loop_devices_user_refuses_locked(&ds, cfg, 0, why, sizeof(why)))); /* root */
	cfg->max_loop_devices_per_user = 0;
	cfg->max_loop_devices = 0;
	forget_all();
}

static void lingering_mounts_give_up_as_many_devices_as_a_mount_needs(void)
{
	char why[512];
	struct teardown td = TEARDOWN_INIT(cfg);
	struct mount_entry *busy = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__KERNEL);
	struct mount_entry *late = mount_in(MOUNT_LINGERING, SQUASH__MOUNT_MODE__KERNEL);
	struct mount_entry *early = mount_in(MOUNT_LINGERING, SQUASH__MOUNT_MODE__KERNEL);
	struct mount_entry *m = mount_in(MOUNT_MOUNTING, SQUASH__MOUNT_MODE__KERNEL);

	late->linger_until_ms = 2000;
	early->linger_until_ms = 1000;
	/* Room for all: nothing ends. */
	cfg->max_loop_devices = 4;
	CHECK(!loop_devices_refuse(&ds, cfg, m, &td, why, sizeof(why)));
	CHECK(td.head == NULL);
	/* Room for one less: the earliest expiry ends, and only it. */
	cfg->max_loop_devices = 3;
	CHECK(!loop_devices_refuse(&ds, cfg, m, &td, why, sizeof(why)));
	CHECK(td.head == early && early->teardown_next == NULL);
	CHECK_INT(early->state, MOUNT_UNMOUNTING);
	CHECK_INT(late->state, MOUNT_LINGERING);
	/* The mounts in use (the unmounting one until it is gone) fill the
	 * limit: refused, and the lingering one keeps its device. */
	td.head = NULL;
	cfg->max_loop_devices = 2;
	CHECK(loop_devices_refuse(&ds, cfg, m, &td, why, sizeof(why)));
	CHECK(td.head == NULL);
	CHECK_INT(late->state, MOUNT_LINGERING);
	CHECK(strstr(why, "no loop device for a kernel mount: squashd already holds 3 (max_loop_devices = 2)") != NULL);
	/* Health counts only what cannot be given up. */
	CHECK_INT(LOCKED(&ds, loop_devices_in_use_locked(&ds, false)), 3);
	CHECK_INT(LOCKED(&ds, loop_devices_in_use_locked(&ds, true)), 4);
	(void)busy;
	cfg->max_loop_devices = 0;
	forget_all();
}

int main(void)
{
	if (core_fixture_start(dir, &cfg, &ds) < 0)
		return 1;
	a_users_share_counts_distinct_kernel_mounts_they_hold_or_are_given();
	lingering_mounts_give_up_as_many_devices_as_a_mount_needs();
	core_fixture_stop(dir, cfg, &ds);
	return unit_exit_code();
}

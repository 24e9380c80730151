/* One user's share of the merged mounts (daemon/core/merged_budget.c), on
 * a registry with no real mounts: the distinct merged mounts a user's
 * jobs, steps and sessions hold and those being made for the user count,
 * a shared one once, lingering ones and the images' own mounts not;
 * root and a budget of 0 are not bounded. No root needed. */
#include "config.h"

#include <string.h>

#include "core/daemon.h"
#include "core/merged_budget.h"
#include "core_fixture.h"
#include "unit.h"

static char dir[] = "/tmp/test_merged_budget.XXXXXX";
static struct squashd_config *cfg;
static struct daemon_state ds;
static unsigned next_ino;

static struct mount_entry *mount_in(enum mount_state state, int mode)
{
	struct mount_key k = { .dev = 1, .ino = ++next_ino, .mode = mode, .owner_uid = MOUNT_OWNER_ANY };
	struct mount_entry *m = registry_new_mount(&ds.registry, &k, "/img.sqfs", ds.mount_dir);

	m->state = state;
	return m;
}

/* Adds image to e on mount, merged into merged. */
static void add(struct job_entry *e, const char *image, struct mount_entry *mount, struct mount_entry *merged)
{
	registry_job_add_image(e, image, "/data", mount);
	e->images[e->count - 1].merged = merged;
}

static void a_users_share_counts_the_distinct_merged_mounts_they_hold_or_are_given(void)
{
	char why[512];
	struct mount_entry *lower = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__KERNEL);
	struct mount_entry *m1 = mount_in(MOUNT_READY, MOUNT_MODE_MERGED);
	struct mount_entry *m2 = mount_in(MOUNT_READY, MOUNT_MODE_MERGED);
	struct mount_entry *lingering = mount_in(MOUNT_LINGERING, MOUNT_MODE_MERGED);
	struct mount_entry *making = mount_in(MOUNT_MOUNTING, MOUNT_MODE_MERGED);
	struct mount_entry *others = mount_in(MOUNT_MOUNTING, MOUNT_MODE_MERGED);
	struct job_entry *job = registry_add_job(&ds.registry, 1, 1000);
	struct job_entry *again = registry_add_job(&ds.registry, 2, 1000);
	struct job_entry *session = registry_add_scoped(&ds.registry, HOLDER_SESSION, 0, 0, 1000);
	struct job_entry *other = registry_add_job(&ds.registry, 3, 1001);
	struct job_entry *root = registry_add_job(&ds.registry, 4, 0);

	(void)lingering;
	making->mounting_for = 1000;
	others->mounting_for = 1001;
	add(job, "/a", lower, m1);
	add(job, "/b", lower, m1); /* one group: once */
	add(again, "/a", lower, m1); /* shared: once */
	add(session, "/c", lower, m2);
	add(other, "/a", lower, m1);
	add(root, "/a", lower, m2);
	CHECK_INT(LOCKED(&ds, merged_mounts_of_user_locked(&ds, 1000)), 3); /* m1, m2, making */
	CHECK_INT(LOCKED(&ds, merged_mounts_of_user_locked(&ds, 1001)), 2); /* m1, others */
	CHECK_INT(LOCKED(&ds, merged_mounts_of_user_locked(&ds, 1002)), 0);

	cfg->max_merged_mounts_per_user = 4;
	CHECK(!LOCKED(&ds, merged_mounts_user_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	cfg->max_merged_mounts_per_user = 3;
	CHECK(LOCKED(&ds, merged_mounts_user_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	CHECK(strstr(why, "the jobs and sessions of uid 1000 on this node already hold 3 merged mounts") != NULL);
	CHECK(strstr(why, "max_merged_mounts_per_user = 3") != NULL);
	CHECK(!LOCKED(&ds, merged_mounts_user_refuses_locked(&ds, cfg, 1001, why, sizeof(why))));
	CHECK(!LOCKED(&ds, merged_mounts_user_refuses_locked(&ds, cfg, 0, why, sizeof(why)))); /* root */
	cfg->max_merged_mounts_per_user = 0;
	CHECK(!LOCKED(&ds, merged_mounts_user_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
}

int main(void)
{
	if (core_fixture_start(dir, &cfg, &ds) < 0)
		return 1;
	a_users_share_counts_the_distinct_merged_mounts_they_hold_or_are_given();
	core_fixture_stop(dir, cfg, &ds);
	return unit_exit_code();
}

/* One user's share of the node's FUSE mount table
 * (daemon/core/user_fuse_mounts.c, settings/fuse_conf.c), on a registry
 * with no real mounts: fusermount's mount_max read as fusermount reads
 * it; the share a quarter of it unless set; a user's FUSE mounts in every
 * state but failed and their sessions' binds of them counted, not kernel
 * mounts, merges or other users'; root never refused. No root needed. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core/daemon.h"
#include "core/user_fuse_mounts.h"
#include "core_fixture.h"
#include "settings/fuse_conf.h"
#include "unit.h"

static char dir[] = "/tmp/test_user_fuse_mounts.XXXXXX";
static struct squashd_config *cfg;
static struct daemon_state ds;
static unsigned next_ino;

static int mount_max_of(const char *text)
{
	char path[sizeof(dir) + 16];
	FILE *f;

	snprintf(path, sizeof(path), "%s/fuse.conf", dir);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
	int max = fuse_conf_mount_max(path);
	unlink(path);
	return max;
}

static void mount_max_is_read_as_fusermount_reads_it(void)
{
	char long_line[400];

	CHECK_INT(fuse_conf_mount_max("/nonexistent/fuse.conf"), 1000);
	CHECK_INT(mount_max_of("#mount_max = 10\nuser_allow_other\n"), 1000);
	CHECK_INT(mount_max_of("mount_max = 40\n"), 40);
	CHECK_INT(mount_max_of("  mount_max=12   # twelve\n"), 12);
	CHECK_INT(mount_max_of("mount_max = 40\nmount_max = 0x20\n"), 32); /* the last, %i */
	CHECK_INT(mount_max_of("mount_max = -1\n"), -1);
	CHECK_INT(mount_max_of("mount_max = 40"), 1000); /* no newline: fusermount skips it */
	memset(long_line, ' ', sizeof(long_line));
	memcpy(long_line + 300, "mount_max = 7\n", 15);
	CHECK_INT(mount_max_of(long_line), 1000); /* past its 256 bytes: skipped whole */
}

static void the_share_is_a_quarter_of_mount_max_unless_set(void)
{
	cfg->fusermount_mount_max = 1000;
	CHECK_INT(user_fuse_mounts_limit(cfg), 250);
	cfg->fusermount_mount_max = 3;
	CHECK_INT(user_fuse_mounts_limit(cfg), 1);
	cfg->fusermount_mount_max = -1;
	CHECK_INT(user_fuse_mounts_limit(cfg), 0);
	cfg->max_fuse_mounts_per_user = 9;
	CHECK_INT(user_fuse_mounts_limit(cfg), 9);
	cfg->max_fuse_mounts_per_user = 0;
}

static struct mount_entry *mount_in(enum mount_state state, int mode, uid_t owner)
{
	struct mount_key k = { .dev = 1, .ino = ++next_ino, .mode = mode, .owner_uid = owner };
	struct mount_entry *m = registry_new_mount(&ds.registry, &k, "/img.sqfs", ds.mount_dir);

	m->state = state;
	return m;
}

static void a_users_mounts_and_session_binds_count_against_their_share(void)
{
	char why[1024];
	struct mount_entry *a = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__FUSE, 1000);
	struct mount_entry *b = mount_in(MOUNT_LINGERING, SQUASH__MOUNT_MODE__FUSE, 1000);
	struct mount_entry *c = mount_in(MOUNT_MOUNTING, SQUASH__MOUNT_MODE__FUSE, 1000);
	struct mount_entry *kernel = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__KERNEL, MOUNT_OWNER_ANY);
	struct mount_entry *merged = mount_in(MOUNT_READY, MOUNT_MODE_MERGED, 1000);
	struct mount_entry *other = mount_in(MOUNT_READY, SQUASH__MOUNT_MODE__FUSE, 1001);
	struct job_entry *session = registry_add_scoped(&ds.registry, HOLDER_SESSION, 0, 0, 1000);
	struct job_entry *job = registry_add_job(&ds.registry, 1, 1000);

	mount_in(MOUNT_FAILED, SQUASH__MOUNT_MODE__FUSE, 1000);
	registry_job_add_image(job, "/a", "/squash/a", a);         /* a job's bind: its own namespace */
	registry_job_add_image(session, "/a", "/squash/a", a);     /* bound: one more */
	registry_job_add_image(session, "/k", "/squash/k", kernel); /* squashfs: not counted */
	registry_job_add_image(session, "/c", "/squash/m", c);
	session->images[2].merged = merged;                        /* the overlay is bound */
	CHECK_INT(LOCKED(&ds, user_fuse_mounts_locked(&ds, 1000)), 4); /* a, b, c, a's bind */
	CHECK_INT(LOCKED(&ds, user_fuse_mounts_locked(&ds, 1001)), 1);

	cfg->max_fuse_mounts_per_user = 5;
	CHECK(!LOCKED(&ds, user_fuse_mounts_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	cfg->max_fuse_mounts_per_user = 4;
	CHECK(LOCKED(&ds, user_fuse_mounts_refuses_locked(&ds, cfg, 1000, why, sizeof(why))));
	CHECK(strstr(why, "the images of uid 1000 already put 4 FUSE file systems in this node's mount table") != NULL);
	CHECK(strstr(why, "(max_fuse_mounts_per_user = 4, of fusermount's mount_max") != NULL);
	CHECK(!LOCKED(&ds, user_fuse_mounts_refuses_locked(&ds, cfg, 1001, why, sizeof(why))));
	CHECK(!LOCKED(&ds, user_fuse_mounts_refuses_locked(&ds, cfg, 0, why, sizeof(why)))); /* root */
	cfg->max_fuse_mounts_per_user = 0;
	(void)b;
	(void)other;
	session->images[2].merged = NULL;
	core_fixture_forget_all(&ds);
}

int main(void)
{
	if (core_fixture_start(dir, &cfg, &ds) < 0)
		return 1;
	mount_max_is_read_as_fusermount_reads_it();
	the_share_is_a_quarter_of_mount_max_unless_set();
	a_users_mounts_and_session_binds_count_against_their_share();
	core_fixture_stop(dir, cfg, &ds);
	return unit_exit_code();
}

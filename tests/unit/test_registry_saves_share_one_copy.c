/* Registry saves (core/daemon.c): the saver thread copies the registry
 * once per write, for every save asked for until it takes the copy, so
 * saves asked for in a burst (a user's loop of sessions, under the lock
 * every request takes) cost one copy, not one each; and a save waited
 * for is on disk with every change made before it was asked for. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core_fixture.h"
#include "registry/registry.h"
#include "unit.h"

int main(void)
{
	char d[] = "/tmp/test_registry_saves.XXXXXX";
	struct squashd_config *cfg = NULL;
	struct daemon_state ds = { 0 };

	if (core_fixture_start(d, &cfg, &ds) < 0) {
		CHECK(!"core fixture");
		return unit_exit_code();
	}
	/* The first save starts the saver; wait for it to be written. */
	CHECK_INT(LOCKED(&ds, daemon_save_grouped_locked(&ds)), 0);
	unsigned long long before = ds.save_copies;
	CHECK(before >= 1);

	/* 200 saves asked for while the lock is held (the saver cannot copy
	 * meanwhile), then one waited for: one copy for all of them. */
	pthread_mutex_lock(&ds.lock);
	for (int i = 0; i < 200; i++)
		CHECK_INT(daemon_save_locked(&ds), 0);
	CHECK_INT(daemon_save_grouped_locked(&ds), 0);
	unsigned long long copies = ds.save_copies - before;
	pthread_mutex_unlock(&ds.lock);
	CHECK_INT(copies, 1);

	/* A change, then a save waited for: the file holds it. */
	pthread_mutex_lock(&ds.lock);
	struct mount_key key = { .mode = SQUASH__MOUNT_MODE__KERNEL, .owner_uid = MOUNT_OWNER_ANY };
	struct mount_entry *m = registry_add_mount(&ds.registry, &key, "/images/one.sqfs", "/run/x/m1");
	CHECK(m != NULL);
	CHECK_INT(daemon_save_grouped_locked(&ds), 0);
	pthread_mutex_unlock(&ds.lock);
	FILE *f = fopen(ds.state_path, "r");
	char text[8192] = "";
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	text[n] = '\0';
	if (f)
		fclose(f);
	CHECK(strstr(text, "/images/one.sqfs") != NULL);

	LOCKED_DO(&ds, core_fixture_forget_all(&ds));
	core_fixture_stop(d, cfg, &ds);
	return unit_exit_code();
}

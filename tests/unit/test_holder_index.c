/* Each mount's holders found in one pass (daemon/core/holder_index.c) are
 * those holders_next_locked finds one mount at a time, in its order: jobs,
 * then steps and sessions; a holder that uses a mount twice (two targets
 * of one image, an image and its merge group) once; a mount nobody holds,
 * none; a mount the index was not built with, none. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/daemon.h"
#include "core/holder_index.h"
#include "core/holders.h"
#include "unit.h"

#define MOUNTS 40

static struct daemon_state ds;

int main(void)
{
	struct mount_entry *m[MOUNTS], *stranger;
	struct mount_key k;
	struct holder_index idx;
	char name[32];
	unsigned seed = 7;

	memset(&k, 0, sizeof(k));
	for (int i = 0; i < MOUNTS; i++) {
		snprintf(name, sizeof(name), "/img%d.sqfs", i);
		k.owner_uid = (uid_t)i;
		m[i] = registry_add_mount(&ds.registry, &k, name, name);
	}
	/* Jobs and scoped holders using mounts at random, some twice, some
	 * through a merge group; mount 0 is nobody's. */
	for (int j = 0; j < 24; j++) {
		struct job_entry *e = j < 16 ? registry_add_job(&ds.registry, 100 + (uint32_t)j, 1000)
				     : registry_add_scoped(&ds.registry, j % 2 ? HOLDER_STEP : HOLDER_SESSION,
							   100 + (uint32_t)j, (uint32_t)j, 1000);

		CHECK(e != NULL);
		if (!e)
			continue;
		for (int n = 0; n < 6; n++) {
			seed = seed * 1103515245u + 12345u;
			int a = 1 + (int)((seed >> 8) % (MOUNTS - 1));

			CHECK_INT(registry_job_add_image(e, "/x.sqfs", "/squash/x", m[a]), 0);
			if (n == 5) /* the same mount again, and a merge group */
				CHECK_INT(registry_job_add_image(e, "/x.sqfs", "/squash/y", m[a]), 0);
			if (n == 4)
				e->images[e->count - 1].merged = m[1 + (a % (MOUNTS - 1))];
		}
	}
	CHECK_INT(holder_index_build_locked(&ds, &idx), 0);
	for (int i = 0; i < MOUNTS; i++) {
		size_t n, at = 0;
		const struct job_entry *const *h = holder_index_of(&idx, m[i], &n);
		bool same = true;

		for (const struct job_entry *e = holders_next_locked(&ds, NULL, m[i]); e;
		     e = holders_next_locked(&ds, e, m[i]))
			same &= at < n && h[at++] == e;
		CHECK(same && at == n);
		if (i == 0)
			CHECK_INT(n, 0);
	}
	/* Not in the index: nobody's. */
	stranger = registry_add_mount(&ds.registry, &k, "/late.sqfs", "/late");
	size_t n = 99;
	CHECK(holder_index_of(&idx, stranger, &n) == NULL);
	CHECK_INT(n, 0);
	holder_index_free(&idx);
	/* An empty registry. */
	registry_free(&ds.registry);
	CHECK_INT(holder_index_build_locked(&ds, &idx), 0);
	CHECK(holder_index_of(&idx, stranger, &n) == NULL && n == 0);
	holder_index_free(&idx);
	return unit_exit_code();
}

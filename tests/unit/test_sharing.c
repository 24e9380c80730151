/* The sharing engine's refcounts and the holders' releases
 * (daemon/core/sharing.h, daemon/core/holders.h), driven on a registry
 * with no real mounts: what the last reference does to a mount in each
 * state, what releasing a job, its steps and a step does to the
 * references, and when new mounts are refused. No root needed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/daemon.h"
#include "core/holders.h"
#include "core/sharing.h"
#include "registry/state_file.h"
#include "core_fixture.h"
#include "unit.h"

static char dir[] = "/tmp/test_sharing.XXXXXX";
static struct squashd_config *cfg;
static struct daemon_state ds;

static struct mount_entry *mount_in(enum mount_state state, unsigned refcount, unsigned ino)
{
	struct mount_key k = { .dev = 1, .ino = ino, .mode = SQUASH__MOUNT_MODE__KERNEL,
			       .owner_uid = MOUNT_OWNER_ANY };
	struct mount_entry *m = registry_new_mount(&ds.registry, &k, "/img.sqfs", ds.mount_dir);

	m->state = state;
	m->refcount = refcount;
	return m;
}

static size_t mounts(void)
{
	size_t n = 0;
	for (struct mount_entry *m = ds.registry.mounts; m; m = m->next)
		n++;
	return n;
}

static void the_last_reference_of_a_ready_mount_queues_its_unmount(void)
{
	struct teardown td = TEARDOWN_INIT(cfg);
	struct mount_entry *m = mount_in(MOUNT_READY, 2, 1);

	cfg->linger_s = 0;
	LOCKED_DO(&ds, sharing_put_locked(&ds, m, &td));
	CHECK_INT(m->refcount, 1);
	CHECK(td.head == NULL);
	LOCKED_DO(&ds, sharing_put_locked(&ds, m, &td));
	CHECK_INT(m->refcount, 0);
	CHECK_INT(m->state, MOUNT_UNMOUNTING);
	CHECK(td.head == m);
	/* An unmounting mount is never shared and takes no more puts. */
	CHECK(registry_find_mount(&ds.registry, &m->key) == NULL);
	LOCKED_DO(&ds, sharing_put_locked(&ds, m, &td));
	CHECK_INT(m->refcount, 0);
	registry_remove_mount(&ds.registry, m);
}

static void with_linger_the_last_reference_keeps_the_mount_for_the_next_job(void)
{
	struct teardown td = TEARDOWN_INIT(cfg);
	struct mount_entry *m = mount_in(MOUNT_READY, 1, 2);

	cfg->linger_s = 30;
	LOCKED_DO(&ds, sharing_put_locked(&ds, m, &td));
	CHECK_INT(m->state, MOUNT_LINGERING);
	CHECK(td.head == NULL);
	CHECK(registry_find_mount(&ds.registry, &m->key) == m);
	/* But not while squashd stops. */
	struct mount_entry *n = mount_in(MOUNT_READY, 1, 3);
	ds.stopping = true;
	LOCKED_DO(&ds, sharing_put_locked(&ds, n, &td));
	ds.stopping = false;
	CHECK_INT(n->state, MOUNT_UNMOUNTING);
	CHECK(td.head == n);
	cfg->linger_s = 0;
	registry_remove_mount(&ds.registry, m);
	registry_remove_mount(&ds.registry, n);
}

static void failed_and_dead_mounts_are_forgotten_with_their_last_reference(void)
{
	struct teardown td = TEARDOWN_INIT(cfg);
	size_t before = mounts();

	mount_in(MOUNT_FAILED, 1, 4);
	struct mount_entry *dead = mount_in(MOUNT_DEAD, 2, 5);
	LOCKED_DO(&ds, sharing_put_locked(&ds, ds.registry.mounts->next, &td)); /* the failed one */
	CHECK_INT(mounts(), before + 1);
	LOCKED_DO(&ds, sharing_put_locked(&ds, dead, &td));
	CHECK_INT(mounts(), before + 1);
	LOCKED_DO(&ds, sharing_put_locked(&ds, dead, &td));
	CHECK_INT(mounts(), before);
	CHECK(td.head == NULL);
	/* NULL (a mount lost in a restart) is nothing to drop. */
	LOCKED_DO(&ds, sharing_put_locked(&ds, NULL, &td));
}

static void a_mount_being_made_stays_while_its_mounter_holds_it(void)
{
	struct teardown td = TEARDOWN_INIT(cfg);
	struct mount_entry *m = mount_in(MOUNT_MOUNTING, 2, 6);

	LOCKED_DO(&ds, sharing_put_locked(&ds, m, &td));
	LOCKED_DO(&ds, sharing_put_locked(&ds, m, &td));
	CHECK_INT(m->state, MOUNT_MOUNTING);
	CHECK(td.head == NULL);
	registry_remove_mount(&ds.registry, m);
}

static void releasing_a_job_drops_its_references_and_its_steps(void)
{
	struct teardown td = TEARDOWN_INIT(cfg);
	struct mount_entry *shared = mount_in(MOUNT_READY, 3, 7);
	struct mount_entry *own = mount_in(MOUNT_READY, 1, 8);
	struct job_entry *job = registry_add_job(&ds.registry, 50, 1000);
	struct job_entry *other = registry_add_job(&ds.registry, 51, 1000);
	struct job_entry *step = registry_add_scoped(&ds.registry, HOLDER_STEP, 50, 2, 1000);
	struct job_entry *pending_step = registry_add_scoped(&ds.registry, HOLDER_STEP, 50, 3, 1000);

	registry_job_add_image(job, "/a", "/squash/a", shared);
	registry_job_add_image(other, "/a", "/squash/a", shared);
	registry_job_add_image(step, "/b", "/squash/b", own);
	registry_job_add_image(step, "/a", "/squash/c", shared);
	pending_step->pending = true;

	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 50, &td)), HOLDER_RELEASED);
	CHECK(registry_find_job(&ds.registry, 50) == NULL);
	CHECK(registry_find_step(&ds.registry, 50, 2) == NULL);
	CHECK(registry_find_step(&ds.registry, 50, 3) == pending_step); /* still mounting */
	CHECK_INT(shared->refcount, 1); /* the other job's */
	CHECK_INT(own->state, MOUNT_UNMOUNTING);
	CHECK(td.head == own);
	/* Idempotent: again, and for a job never seen. */
	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 50, &td)), HOLDER_UNKNOWN);
	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 999, &td)), HOLDER_UNKNOWN);
	/* A job whose mount request is at work is not released. */
	other->pending = true;
	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 51, &td)), HOLDER_PENDING);
	other->pending = false;
	CHECK_INT(LOCKED(&ds, holders_release_step_locked(&ds, 50, 3, &td)), HOLDER_PENDING);
	pending_step->pending = false;
	CHECK_INT(LOCKED(&ds, holders_release_step_locked(&ds, 50, 3, &td)), HOLDER_RELEASED);
	CHECK_INT(LOCKED(&ds, holders_release_step_locked(&ds, 50, 3, &td)), HOLDER_UNKNOWN);
	CHECK_INT(LOCKED(&ds, holders_release_job_locked(&ds, 51, &td)), HOLDER_RELEASED);
	CHECK_INT(shared->refcount, 0);
	CHECK_INT(shared->state, MOUNT_UNMOUNTING);
	/* Every release saved the registry (the saver thread writes it). */
	pthread_mutex_lock(&ds.lock);
	while (ds.save_durable < ds.save_taken && ds.save_failed < ds.save_taken)
		pthread_cond_wait(&ds.saved, &ds.lock);
	pthread_mutex_unlock(&ds.lock);
	struct registry saved = { 0 };
	char err[512];
	CHECK_INT(state_file_load(&saved, ds.state_path, err, sizeof(err)), 0);
	CHECK(saved.jobs == NULL && saved.scoped == NULL);
	registry_free(&saved);
	registry_remove_mount(&ds.registry, shared);
	registry_remove_mount(&ds.registry, own);
}

static void new_mounts_are_refused_while_stopping_or_unsaved(void)
{
	char why[1024];

	CHECK_INT(LOCKED(&ds, daemon_refuse_new_mounts_locked(&ds, why, sizeof(why))), SQUASH__STATUS__OK);
	ds.stopping = true;
	CHECK_INT(LOCKED(&ds, daemon_refuse_new_mounts_locked(&ds, why, sizeof(why))), SQUASH__STATUS__UNAVAILABLE);
	CHECK_STR(why, "squashd is stopping");
	ds.stopping = false;
	/* The registry cannot be saved (its directory is gone). */
	char saved_path[sizeof(ds.state_path)];
	memcpy(saved_path, ds.state_path, sizeof(saved_path));
	snprintf(ds.state_path, sizeof(ds.state_path), "%s/gone/state", dir);
	pthread_mutex_lock(&ds.lock);
	CHECK_INT(daemon_save_grouped_locked(&ds), -1); /* (waits for the saver) */
	pthread_mutex_unlock(&ds.lock);
	CHECK_INT(ds.registry_save_errors, 1);
	CHECK_INT(LOCKED(&ds, daemon_refuse_new_mounts_locked(&ds, why, sizeof(why))), SQUASH__STATUS__NODE_ERROR);
	CHECK_CONTAINS(why, "squashd on this node cannot save its registry (cannot write ");
	CHECK_CONTAINS(why, "it mounts nothing until it can");
	/* It can again: the refusal ends with the next try. */
	memcpy(ds.state_path, saved_path, sizeof(saved_path));
	CHECK_INT(LOCKED(&ds, daemon_refuse_new_mounts_locked(&ds, why, sizeof(why))), SQUASH__STATUS__OK);
	CHECK_STR(ds.save_error, "");
}

int main(void)
{
	if (core_fixture_start(dir, &cfg, &ds) < 0)
		return 1;
	the_last_reference_of_a_ready_mount_queues_its_unmount();
	with_linger_the_last_reference_keeps_the_mount_for_the_next_job();
	failed_and_dead_mounts_are_forgotten_with_their_last_reference();
	a_mount_being_made_stays_while_its_mounter_holds_it();
	releasing_a_job_drops_its_references_and_its_steps();
	new_mounts_are_refused_while_stopping_or_unsaved();
	core_fixture_stop(dir, cfg, &ds);
	return unit_exit_code();
}

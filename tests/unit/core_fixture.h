/* A daemon core for unit tests, without root: a daemon_state whose state
 * directory is a fresh temporary directory, with default settings. */
#ifndef SQUASH_CORE_FIXTURE_H
#define SQUASH_CORE_FIXTURE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/daemon.h"

/* Calls a *_locked function under ds->lock, as squashd does: saves hand
 * snapshots to the saver thread, which takes the lock too. */
#define LOCKED(ds, expr) __extension__({ \
	pthread_mutex_lock(&(ds)->lock); \
	__typeof__(expr) locked_value_ = (expr); \
	pthread_mutex_unlock(&(ds)->lock); \
	locked_value_; \
})
#define LOCKED_DO(ds, stmt) do { \
	pthread_mutex_lock(&(ds)->lock); \
	stmt; \
	pthread_mutex_unlock(&(ds)->lock); \
} while (0)

/* Makes dir (a mkdtemp template), *cfg and ds. Returns 0, or -1 having
 * said why. */
static int core_fixture_start(char *dir, struct squashd_config **cfg, struct daemon_state *ds)
{
	char err[512];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return -1;
	}
	*cfg = settings_new();
	config_defaults(*cfg);
	if (config_set(*cfg, "state_dir", dir, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	return daemon_init(ds, *cfg);
}

/* Forgets every job, step, session and mount of ds's registry, for the
 * next case to start from nothing. */
static inline void core_fixture_forget_all(struct daemon_state *ds)
{
	while (ds->registry.jobs)
		registry_remove_job(&ds->registry, ds->registry.jobs);
	while (ds->registry.scoped)
		registry_remove_scoped(&ds->registry, ds->registry.scoped);
	while (ds->registry.mounts)
		registry_remove_mount(&ds->registry, ds->registry.mounts);
}

/* Frees the registry, removes its file and dir, lets the settings go. */
static void core_fixture_stop(char *dir, struct squashd_config *cfg, struct daemon_state *ds)
{
	daemon_free(ds);
	unlink(ds->state_path);
	rmdir(dir);
	settings_drop(cfg);
}

#endif

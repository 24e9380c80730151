/* Reconciling the registry with Slurm ("gc"): a job that no longer runs on
 * this node is released as if its epilog had come, so a lost epilog
 * (squashd down or restarting, slurmd killed, a node reboot of slurmd only)
 * leaks nothing; so is a step with images of its own whose slurmstepd
 * died unnoticed. Runs at start-up, every gc_interval seconds, and on
 * demand (squashctl gc). A record that a slurmstepd on this node vouches
 * for (slurm/local_steps.h) runs here; Slurm is asked only about the
 * others, by a short-lived child (slurm/slurm_ask.h). A job Slurm calls
 * gone is still kept while any process outside squashd's mount namespace
 * holds a bind of one of its mounts (mount/mount_users.h: a step that is
 * still winding down). */
#ifndef SQUASHD_GC_H
#define SQUASHD_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/daemon.h"

/* Jobs one pass asks about at most (the rest wait for the next pass). */
#define GC_BATCH 1024

/* Starts the periodic pass (the first one at once) unless gc_interval is 0.
 * Returns 0 or -1. */
int gc_start(struct daemon_state *ds, const struct squashd_config *cfg);
void gc_stop(void);

/* One pass now. Returns how many jobs it released (their ids in released,
 * up to cap), or -1 with err. */
int gc_pass(struct daemon_state *ds, const struct squashd_config *cfg, uint32_t *released,
	    size_t cap, char *err, size_t errlen);

/* health: asks Slurm about every registered job, as a pass does, but
 * releases nothing; calls say() with one line per job that no longer
 * runs here: a problem when gc releases its mounts, a note (note true)
 * when gc keeps them for its user's own processes, which the user
 * chooses (a user must not get the node drained). Says nothing when
 * Slurm cannot be asked within a few seconds (a health check must not
 * fail a node because slurmctld is slow). */
void gc_dry_run(struct daemon_state *ds, const struct squashd_config *cfg,
		void (*say)(void *arg, const char *line, bool note), void *arg);

#endif

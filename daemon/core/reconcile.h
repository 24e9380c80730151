/* Reconciling the registry with Slurm ("gc"): a job that no longer runs on
 * this node is released as if its epilog had come, so a lost epilog
 * (squashd down or restarting, slurmd killed, a node reboot of slurmd only)
 * leaks nothing. Runs at start-up, every gc_interval seconds, and on
 * demand (squashctl gc).
 *
 * Slurm is asked by a short-lived child (squashd --query-slurm,
 * slurm_query.c) that links libslurm: reading slurm.conf or reaching
 * slurmctld may fail, hang or call fatal(), and none of that may touch the
 * daemon. A job Slurm calls gone is still kept while any process outside
 * squashd's mount namespace holds a bind of one of its mounts (a step that
 * is still winding down). */
#ifndef SQUASHD_RECONCILE_H
#define SQUASHD_RECONCILE_H

#include "core/job_mounts.h"

/* Starts the periodic pass (the first one at once) unless gc_interval is 0.
 * Returns 0 or -1. */
int reconcile_start(struct daemon_state *ds);
void reconcile_stop(void);

/* One pass now; the answer lists the released jobs (gc request). */
void reconcile_on_demand(struct daemon_state *ds, struct reply *out);

/* health: asks Slurm about every registered job, as a pass does, but
 * releases nothing; calls problem() with one line per job that no longer
 * runs here. Says nothing when Slurm cannot be asked within a few seconds
 * (a health check must not fail a node because slurmctld is slow). */
void reconcile_dry_run(struct daemon_state *ds, void (*problem)(void *arg, const char *line),
		       void *arg);

#endif

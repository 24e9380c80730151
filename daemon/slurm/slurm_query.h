/* The one place where squashd talks to slurmctld: the hidden mode
 * `squashd --query-slurm NODE ID...`, run as a short-lived child by gc
 * (core/gc.c, through slurm/slurm_ask.c). Linking libslurm into a child keeps slurm.conf parsing,
 * a hung slurmctld and libslurm's fatal() away from the daemon. */
#ifndef SQUASHD_SLURM_QUERY_H
#define SQUASHD_SLURM_QUERY_H

/* Each ID is JOBID or JOBID.STEPID. Prints one line per ID:
 * "ID here" (runs on NODE), or "ID gone WHY". Several jobs are asked
 * about in one RPC (all jobs), one job or step in one RPC each. Exits 1
 * with a reason on stderr when slurmctld cannot be asked, 2 on a bad
 * argument. */
int slurm_query_main(int argc, char **argv);

#endif

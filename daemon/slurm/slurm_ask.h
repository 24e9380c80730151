/* Asking Slurm whether jobs and steps still run on this node: runs the
 * query child (`squashd --query-slurm`, slurm/slurm_query.c) with a time
 * limit and reads its verdicts. The daemon never links libslurm's calls
 * itself: reading slurm.conf or reaching slurmctld may fail, hang or call
 * fatal(). */
#ifndef SQUASHD_SLURM_ASK_H
#define SQUASHD_SLURM_ASK_H

#include <stddef.h>
#include <stdint.h>

/* Step id of a question about a whole job. */
#define SLURM_NO_STEP UINT32_MAX

struct slurm_verdict {
	uint32_t job_id;
	uint32_t step_id; /* SLURM_NO_STEP: the job */
	char state[64];   /* "here", or why it is gone */
};

/* Parses the query's output ("JOBID.STEPID VERDICT" or "JOBID VERDICT",
 * one per line; other lines are skipped) into at most max verdicts.
 * Returns how many. Splits output. */
int slurm_verdicts_parse(char *output, struct slurm_verdict *out, size_t max);

/* Asks about ids[i] (with steps[i] != SLURM_NO_STEP: that step; steps may
 * be NULL: jobs only) on node; slurm_conf "" for libslurm's default.
 * Fills out (order not assumed). Returns how many, or -1 with err. */
int slurm_ask(const char *node, const char *slurm_conf, const uint32_t *ids,
	      const uint32_t *steps, size_t n, struct slurm_verdict *out, int timeout_ms,
	      char *err, size_t errlen);

#endif

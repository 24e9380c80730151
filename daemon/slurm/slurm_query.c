#include "config.h"
#include "slurm/slurm_query.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "slurm_compat.h"

/* libslurm has no public name for a state; the base states suffice here. */
static const char *state_name(uint32_t state)
{
	static const char *const names[] = {
		"PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED",
		"TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
	};
	uint32_t base = state & JOB_STATE_BASE;

	if (state & JOB_REQUEUE)
		return "REQUEUED";
	return base < sizeof(names) / sizeof(names[0]) ? names[base] : "UNKNOWN";
}

/* "JOBID.STEPID": whether that step still runs on node. Prints the verdict;
 * returns -1 when slurmctld cannot be asked. */
static int query_step(const char *node, uint32_t id, uint32_t step)
{
	job_step_info_response_msg_t *resp = NULL;
	const char *verdict = "gone step-ended";

	if (squash_slurm_get_step(slurm_get_job_steps, &resp, id, step) != SLURM_SUCCESS) {
		int e = errno;

		if (e != ESLURM_INVALID_JOB_ID) {
			fprintf(stderr, "cannot ask slurmctld about step %u.%u: %s\n", id, step,
				slurm_strerror(e));
			return -1;
		}
		resp = NULL;
	}
	for (uint32_t r = 0; resp && r < resp->job_step_count; r++) {
		job_step_info_t *st = &resp->job_steps[r];

		if (st->step_id.job_id != id || st->step_id.step_id != step)
			continue;
		verdict = squash_slurm_nodelist_has(st->nodes, node) ? "here" : "gone step-elsewhere";
		break;
	}
	printf("%u.%u %s\n", id, step, verdict);
	if (resp)
		slurm_free_job_step_info_response_msg(resp);
	return 0;
}

/* Prints the verdict on job id from what slurmctld said (msg NULL or
 * without the job: slurmctld does not know it). */
static void print_job_verdict(const char *node, uint32_t id, const job_info_msg_t *msg)
{
	const char *verdict = "gone unknown-to-slurmctld";
	char buf[128];

	for (uint32_t r = 0; msg && r < msg->record_count; r++) {
		const slurm_job_info_t *j = &msg->job_array[r];
		uint32_t base = j->job_state & JOB_STATE_BASE;

		if (j->job_id != id)
			continue;
		bool here = squash_slurm_nodelist_has(j->nodes, node);
		/* Running here, or ending here with the epilog still due. */
		if (here && (base == JOB_RUNNING || base == JOB_SUSPENDED ||
			     (j->job_state & JOB_COMPLETING))) {
			verdict = "here";
		} else {
			snprintf(buf, sizeof(buf), "gone %s%s", state_name(j->job_state),
				 here ? "" : "-elsewhere");
			verdict = buf;
		}
		break;
	}
	printf("%u %s\n", id, verdict);
}

/* What slurmctld knows of the jobs among ids (steps[i] == NO_VAL): one
 * RPC for one job, one for all jobs otherwise (gc asks only about what the
 * node itself could not settle, so this is rare). *msg stays NULL when
 * there are no jobs, or the one job is unknown. Returns -1 when slurmctld
 * cannot be asked. */
static int load_jobs(const uint32_t *ids, const uint32_t *steps, size_t n, job_info_msg_t **msg)
{
	size_t jobs = 0, first = 0;
	int rc;

	*msg = NULL;
	for (size_t i = 0; i < n; i++)
		if (steps[i] == NO_VAL && jobs++ == 0)
			first = i;
	if (jobs == 0)
		return 0;
	rc = jobs == 1 ? squash_slurm_load_job(slurm_load_job, msg, ids[first])
		       : slurm_load_jobs(0, msg, SHOW_ALL);
	if (rc != SLURM_SUCCESS) {
		int e = errno;

		*msg = NULL;
		if (jobs == 1 && e == ESLURM_INVALID_JOB_ID)
			return 0;
		fprintf(stderr, "cannot ask slurmctld about %s: %s\n",
			jobs == 1 ? "the job" : "the jobs", slurm_strerror(e));
		return -1;
	}
	return 0;
}

/* Parses "JOBID" or "JOBID.STEPID" (step NO_VAL for a job). */
static bool parse_id(const char *text, uint32_t *id, uint32_t *step)
{
	char *end;
	unsigned long v = strtoul(text, &end, 10);

	if (end == text || v == 0 || v > UINT32_MAX)
		return false;
	*id = (uint32_t)v;
	*step = NO_VAL;
	if (*end == '\0')
		return true;
	if (*end != '.')
		return false;
	const char *s = end + 1;
	v = strtoul(s, &end, 10);
	if (end == s || *end || v >= 0xfffffff0UL)
		return false;
	*step = (uint32_t)v;
	return true;
}

int slurm_query_main(int argc, char **argv)
{
	if (argc < 1) {
		fprintf(stderr, "usage: squashd --query-slurm NODE JOBID[.STEPID]...\n");
		return 2;
	}
	const char *node = argv[0];
	size_t n = (size_t)argc - 1;
	uint32_t *ids = calloc(n ? n : 1, sizeof(*ids)), *steps = calloc(n ? n : 1, sizeof(*steps));
	int rc = 0;

	if (!ids || !steps) {
		fprintf(stderr, "out of memory\n");
		free(ids);
		free(steps);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		if (!parse_id(argv[i + 1], &ids[i], &steps[i])) {
			fprintf(stderr, "bad job id '%s'\n", argv[i + 1]);
			free(ids);
			free(steps);
			return 2;
		}
	slurm_init(NULL);
	job_info_msg_t *jobs = NULL;
	if (load_jobs(ids, steps, n, &jobs) < 0)
		rc = 1;
	/* Verdicts in the order asked. */
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (steps[i] == NO_VAL)
			print_job_verdict(node, ids[i], jobs);
		else if (query_step(node, ids[i], steps[i]) < 0)
			rc = 1;
	}
	if (jobs)
		slurm_free_job_info_msg(jobs);
	fflush(stdout);
	slurm_fini();
	free(ids);
	free(steps);
	return rc;
}

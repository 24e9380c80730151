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

/* "JOBID": whether the job runs on node (or ends there with its epilog
 * still due). Prints the verdict; returns -1 when slurmctld cannot be
 * asked. */
static int query_job(const char *node, uint32_t id)
{
	job_info_msg_t *msg = NULL;
	const char *verdict = "gone unknown-to-slurmctld";
	char buf[128];

	if (squash_slurm_load_job(slurm_load_job, &msg, id) != SLURM_SUCCESS) {
		int e = errno;

		if (e == ESLURM_INVALID_JOB_ID) {
			printf("%u %s\n", id, verdict);
			return 0;
		}
		fprintf(stderr, "cannot ask slurmctld about job %u: %s\n", id, slurm_strerror(e));
		return -1;
	}
	for (uint32_t r = 0; msg && r < msg->record_count; r++) {
		slurm_job_info_t *j = &msg->job_array[r];
		uint32_t base = j->job_state & JOB_STATE_BASE;

		if (j->job_id != id)
			continue;
		bool here = squash_slurm_nodelist_has(j->nodes, node);
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
	slurm_free_job_info_msg(msg);
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
	int rc = 0;

	slurm_init(NULL);
	for (int i = 1; i < argc && rc == 0; i++) {
		uint32_t id, step;

		if (!parse_id(argv[i], &id, &step)) {
			fprintf(stderr, "bad job id '%s'\n", argv[i]);
			rc = 2;
		} else if ((step == NO_VAL ? query_job(node, id) : query_step(node, id, step)) < 0) {
			rc = 1;
		}
	}
	fflush(stdout);
	slurm_fini();
	return rc;
}

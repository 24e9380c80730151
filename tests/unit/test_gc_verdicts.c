/* gc's reading of the Slurm query's answer (daemon/slurm/slurm_ask.h):
 * one verdict per line, for jobs and for steps; anything else is skipped,
 * and no more than asked for is taken. */
#include "config.h"

#include <string.h>

#include "slurm/slurm_ask.h"
#include "unit.h"

static void verdicts_name_jobs_and_steps_and_skip_other_lines(void)
{
	char output[] = "12 here\n"
			"13.4 gone: the step ended\n"
			"squashd: warning: something on stdout\n"
			"\n"
			"14 gone: not in Slurm (purged)\n"
			"4294967295.4294967294 here\n";
	struct slurm_verdict v[8];

	int n = slurm_verdicts_parse(output, v, 8);
	CHECK_INT(n, 4);
	CHECK_INT(v[0].job_id, 12);
	CHECK_INT(v[0].step_id, SLURM_NO_STEP);
	CHECK_STR(v[0].state, "here");
	CHECK_INT(v[1].job_id, 13);
	CHECK_INT(v[1].step_id, 4);
	CHECK_STR(v[1].state, "gone: the step ended");
	CHECK_INT(v[2].job_id, 14);
	CHECK_STR(v[2].state, "gone: not in Slurm (purged)");
	CHECK_INT(v[3].step_id, 4294967294u);
}

static void no_more_verdicts_than_questions_are_taken(void)
{
	char output[] = "1 here\n2 here\n3 here\n";
	struct slurm_verdict v[2];

	CHECK_INT(slurm_verdicts_parse(output, v, 2), 2);
	CHECK_INT(v[1].job_id, 2);
}

static void a_long_verdict_is_cut_not_overrun(void)
{
	char output[256];
	struct slurm_verdict v[1];

	memset(output, 0, sizeof(output));
	strcpy(output, "7 gone: ");
	memset(output + 8, 'x', 200);
	CHECK_INT(slurm_verdicts_parse(output, v, 1), 1);
	CHECK_INT(strlen(v[0].state), sizeof(v[0].state) - 1);
}

int main(void)
{
	verdicts_name_jobs_and_steps_and_skip_other_lines();
	no_more_verdicts_than_questions_are_taken();
	a_long_verdict_is_cut_not_overrun();
	return unit_exit_code();
}

/* A job's array ids, for %a and %A in image paths, asked from slurmctld by
 * the job prolog: Slurm 22.05 gives a SPANK job prolog neither
 * S_JOB_ARRAY_ID/S_JOB_ARRAY_TASK_ID nor SLURM_ARRAY_* variables. */
#ifndef SPANK_SQUASH_JOB_ARRAY_H
#define SPANK_SQUASH_JOB_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fills the array job id and task id of job_id; *is_array is false for a
 * job that is no array task. Returns 0, or -1 with why. */
int squash_job_array_ids(uint32_t job_id, bool *is_array, uint32_t *array_job_id,
			 uint32_t *array_task_id, char *why, size_t whylen);

#endif

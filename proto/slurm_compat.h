/* The libslurm calls whose form changed between Slurm releases, in one
 * place, so that the plugin and squashd build against every release from
 * 22.05 on and the next release is one small change here.
 *
 * Each choice follows a configure check of the headers in use (config.h),
 * not a version number:
 *   SQUASH_HOSTLIST_IS_POINTER   hostlist_t is a pointer (before 23.11)
 *                                or the struct itself (23.11 on)
 *   SQUASH_GET_JOB_STEPS_STEP_ID slurm_get_job_steps(slurm_step_id_t *, ...)
 *                                (25.11 on) or (time, job, step, ...)
 *   SQUASH_LOAD_JOB_STEP_ID      slurm_load_job(resp, slurm_step_id_t, ...)
 *                                (26.05 on) or (resp, uint32_t, ...)
 * slurm_get_errno() is gone since 24.05; it always returned errno, which is
 * what every release sets, so errno is read directly.
 *
 * Header only: the plugin reaches libslurm through dlsym() (no second copy
 * of the library inside slurmstepd), so the calls take the function. Its
 * type is the header's own prototype, never a hand-written cast. */
#ifndef SQUASH_SLURM_COMPAT_H
#define SQUASH_SLURM_COMPAT_H

#include <stdbool.h>
#include <stdint.h>

#include <slurm/slurm.h>

typedef __typeof__(slurm_load_job) squash_load_job_fn;
typedef __typeof__(slurm_get_job_steps) squash_get_job_steps_fn;

/* All that slurmctld knows about one job (SHOW_ALL). */
static inline int squash_slurm_load_job(squash_load_job_fn *load_job, job_info_msg_t **resp,
					uint32_t job_id)
{
#ifdef SQUASH_LOAD_JOB_STEP_ID
	slurm_step_id_t id = SLURM_STEP_ID_INITIALIZER;

	id.job_id = job_id;
	return load_job(resp, id, SHOW_ALL);
#else
	return load_job(resp, job_id, SHOW_ALL);
#endif
}

/* The steps slurmctld knows of one job and step id. */
static inline int squash_slurm_get_step(squash_get_job_steps_fn *get_steps,
					job_step_info_response_msg_t **resp, uint32_t job_id,
					uint32_t step_id)
{
#ifdef SQUASH_GET_JOB_STEPS_STEP_ID
	slurm_step_id_t id = SLURM_STEP_ID_INITIALIZER;

	id.job_id = job_id;
	id.step_id = step_id;
	return get_steps(&id, resp, SHOW_ALL);
#else
	return get_steps(0, job_id, step_id, resp, SHOW_ALL);
#endif
}

/* Whether node is one of the hosts of a Slurm node list ("n[1-3],x"). */
static inline bool squash_slurm_nodelist_has(const char *nodes, const char *node)
{
#ifdef SQUASH_HOSTLIST_IS_POINTER
	hostlist_t hl;
#else
	hostlist_t *hl;
#endif
	bool found;

	if (!nodes || !*nodes)
		return false;
	hl = slurm_hostlist_create(nodes);
	if (!hl)
		return false;
	found = slurm_hostlist_find(hl, node) >= 0;
	slurm_hostlist_destroy(hl);
	return found;
}

#endif

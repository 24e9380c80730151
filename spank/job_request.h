/* The job's prolog and epilog (root, in slurmd, on every node of the job):
 * ask squashd to mount the job's images, and to release them. Both always
 * succeed as far as Slurm is concerned: a failing prolog or epilog drains
 * the node, which a user's mistake must never do. Failures are logged and
 * the job's steps report them (step_bind.c). */
#ifndef SPANK_SQUASH_JOB_REQUEST_H
#define SPANK_SQUASH_JOB_REQUEST_H

#include <slurm/spank.h>

#include "plugin_settings.h"

int squash_job_prolog(spank_t sp, const struct squash_settings *s);
int squash_job_epilog(spank_t sp, const struct squash_settings *s);

#endif

/* Attaching the job's mounts on their targets in a task's private mount
 * namespace, with the new mount API: each node-level mount arrives as a
 * detached copy (open_tree) and is made read-only, nosuid and nodev before
 * it appears on its target. */
#ifndef SPANK_SQUASH_MOUNT_ATTACH_H
#define SPANK_SQUASH_MOUNT_ATTACH_H

#include <stddef.h>

#include "squash.pb-c.h"

/* Attaches the mounts of an OK StepInfo response in the current mount
 * namespace (which the caller made private): trees[i] is a detached copy
 * (open_tree) of job_mounts[i]'s source, or -1 for an image merged with an
 * earlier one at its target. Targets below the response's base directory
 * are made on a tmpfs of the step's own. Returns 0, or -1 with a reason in
 * err. */
int squash_attach_job_mounts(const Squash__Response *resp, const int *trees, char *err,
			     size_t errlen);

#endif

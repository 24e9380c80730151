/* The node-level mounts squashd made, as a task reaches them: copied out of
 * the mount namespace that holds them, and the ones the task's namespace
 * inherited from the host detached again. */
#ifndef SPANK_SQUASH_NODE_MOUNTS_H
#define SPANK_SQUASH_NODE_MOUNTS_H

#include <stddef.h>
#include <sys/types.h>

#include "squash.pb-c.h"

/* Opens (in slurmstepd, before the tasks fork) the mount namespace that
 * holds the node-level mounts: squashd's, or slurmstepd's own when
 * squashd_pid is 0 (unknown). Returns a descriptor, or -1 with err. */
int squash_node_mounts_namespace(pid_t squashd_pid, char *err, size_t errlen);

/* Fills trees[i] with a detached copy (open_tree) of job_mounts[i]'s
 * source, made inside source_ns; images merged at one target are copied
 * once (the others stay -1). The caller is back in its own namespace on
 * return (0), or must not go on (-1, with err); it closes the copies. */
int squash_node_mounts_copy(int source_ns, const Squash__Response *resp, int *trees,
			    char *err, size_t errlen);

/* Detaches, in the current mount namespace only, every mount at or below
 * dir or dir2 (either may be NULL), deepest first, from one read of
 * mountinfo. Returns the number left, -1 on error (err says why). */
int squash_node_mounts_detach(const char *dir, const char *dir2, char *err, size_t errlen);

#endif

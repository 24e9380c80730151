/* Each mount's holders (jobs, steps, sessions), found in one pass over
 * the registry. holders_next_locked finds a mount's holders by looking at
 * every holder's every image: for every mount of a listing that is mounts
 * x references, all of it under the lock every request takes (5,000
 * mounts under 32 sessions of 1,024 images: 10^8 and more, from any user's
 * `list`). Built under the lock, used under it, freed after. */
#ifndef SQUASHD_CORE_HOLDER_INDEX_H
#define SQUASHD_CORE_HOLDER_INDEX_H

#include <stddef.h>

#include "core/daemon.h"

struct holder_index {
	const struct mount_entry **mounts; /* sorted by address */
	size_t *first;                     /* mounts[i]'s holders: holders[first[i] .. first[i + 1]) */
	const struct job_entry **holders;  /* in holders_next_locked's order: jobs, then scoped */
	size_t n_mounts;
};

/* Lock held. 0, or -1 (out of memory; idx is then empty). */
int holder_index_build_locked(const struct daemon_state *ds, struct holder_index *idx);

/* m's holders (*n of them; none for a mount the index does not know). */
const struct job_entry *const *holder_index_of(const struct holder_index *idx, const struct mount_entry *m,
					       size_t *n);

void holder_index_free(struct holder_index *idx);

#endif

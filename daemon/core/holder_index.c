/* Each mount's holders, found in one pass over the registry
 * (holder_index.h). */
#include "config.h"

#include "core/holder_index.h"
#include "core/holders.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const struct mount_entry *const *)a;
	uintptr_t y = (uintptr_t) * (const struct mount_entry *const *)b;

	return x < y ? -1 : x > y;
}

/* m's place in idx->mounts, or -1. */
static long place(const struct holder_index *idx, const struct mount_entry *m)
{
	const struct mount_entry **at;

	if (!m || !idx->n_mounts)
		return -1;
	at = bsearch(&m, idx->mounts, idx->n_mounts, sizeof(*idx->mounts), by_address);
	return at ? (long)(at - idx->mounts) : -1;
}

/* Calls add(idx, i, e) once for each mount i that holder e uses
 * (an image's mount and its merged mount; a mount used twice counts once:
 * last[i] remembers the holder it last saw). */
static void each_use(struct holder_index *idx, const struct job_entry *e, const struct job_entry **last,
		     void (*add)(struct holder_index *, size_t, const struct job_entry *))
{
	for (size_t k = 0; k < e->count; k++) {
		const struct mount_entry *ms[2] = { e->images[k].mount, e->images[k].merged };

		for (int j = 0; j < 2; j++) {
			long i = place(idx, ms[j]);

			if (i >= 0 && last[i] != e) {
				last[i] = e;
				add(idx, (size_t)i, e);
			}
		}
	}
}

static void count_one(struct holder_index *idx, size_t i, const struct job_entry *e)
{
	(void)e;
	idx->first[i + 1]++;
}

static void place_one(struct holder_index *idx, size_t i, const struct job_entry *e)
{
	/* first[i] runs ahead while filling; put back after. */
	idx->holders[idx->first[i]++] = e;
}

int holder_index_build_locked(const struct daemon_state *ds, struct holder_index *idx)
{
	const struct job_entry **last = NULL;
	size_t n = 0, total;

	memset(idx, 0, sizeof(*idx));
	for (const struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		n++;
	idx->mounts = calloc(n ? n : 1, sizeof(*idx->mounts));
	idx->first = calloc(n + 1, sizeof(*idx->first));
	last = calloc(n ? n : 1, sizeof(*last));
	if (!idx->mounts || !idx->first || !last)
		goto fail;
	for (const struct mount_entry *m = ds->registry.mounts; m; m = m->next)
		idx->mounts[idx->n_mounts++] = m;
	qsort(idx->mounts, idx->n_mounts, sizeof(*idx->mounts), by_address);
	for (const struct job_entry *e = holders_next_locked(ds, NULL, NULL); e;
	     e = holders_next_locked(ds, e, NULL))
		each_use(idx, e, last, count_one);
	for (size_t i = 0; i < n; i++)
		idx->first[i + 1] += idx->first[i];
	total = idx->first[n];
	idx->holders = calloc(total ? total : 1, sizeof(*idx->holders));
	if (!idx->holders)
		goto fail;
	memset(last, 0, (n ? n : 1) * sizeof(*last));
	for (const struct job_entry *e = holders_next_locked(ds, NULL, NULL); e;
	     e = holders_next_locked(ds, e, NULL))
		each_use(idx, e, last, place_one);
	/* Each first[i] now stands where first[i + 1] began. */
	memmove(idx->first + 1, idx->first, n * sizeof(*idx->first));
	idx->first[0] = 0;
	free(last);
	return 0;
fail:
	free(last);
	holder_index_free(idx);
	return -1;
}

const struct job_entry *const *holder_index_of(const struct holder_index *idx, const struct mount_entry *m,
					       size_t *n)
{
	long i = place(idx, m);

	if (i < 0) {
		*n = 0;
		return NULL;
	}
	*n = idx->first[i + 1] - idx->first[i];
	return idx->holders + idx->first[i];
}

void holder_index_free(struct holder_index *idx)
{
	free(idx->mounts);
	free(idx->first);
	free(idx->holders);
	memset(idx, 0, sizeof(*idx));
}

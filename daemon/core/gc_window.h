/* Which of the registry's records a gc pass asks Slurm about (core/gc.c):
 * at most GC_BATCH, starting where the last pass stopped and wrapping
 * around. From the newest each time, records gc keeps (a process still
 * uses the mount; a user's namespaces not all read) could fill every
 * pass's questions: with more than GC_BATCH of them in front, another
 * user's lost job was never asked about, and its mounts stayed. */
#ifndef SQUASHD_GC_WINDOW_H
#define SQUASHD_GC_WINDOW_H

#include <stddef.h>
#include <stdint.h>

/* Copies at most max of ids[n] (and steps[n], may be NULL) from *cursor
 * on, wrapping, into out_ids (out_steps); moves *cursor past them.
 * Returns how many. */
size_t gc_window(const uint32_t *ids, const uint32_t *steps, size_t n, size_t *cursor,
		 uint32_t *out_ids, uint32_t *out_steps, size_t max);

#endif

/* This process's mount table (/proc/self/mountinfo), kept between
 * questions and read again only when the kernel says it changed.
 *
 * Why: squashd's trusted walk judges every mount a path crosses by the
 * table, and a user can lengthen it (fusermount mounts at long paths:
 * 16 MB for 1,000 of them); read whole for each question, that cost every
 * user's image opens a tenth of a second each. The kernel raises POLLPRI
 * on an open mountinfo once the namespace's mounts changed since that
 * descriptor was last polled, and a mount id can be reused once its
 * mount is gone, so a table is used only while no change was seen. */
#ifndef SQUASH_MOUNT_TABLE_CACHE_H
#define SQUASH_MOUNT_TABLE_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "mountinfo.h"

/* Calls use(table, arg) with the current table and returns what it
 * returns. Neither the read nor use runs under a lock others wait for:
 * callers at once share a table kept, or each read their own after a
 * change; a read is kept for later callers only if no change was seen
 * since it began; fresh: the table read now, whatever the
 * kernel says (a second look after a verdict that is no). -1 with why
 * when the table cannot be read. A forked child (squashd's opener) never
 * shares its parent's table, lock or descriptor: it reads its own. */
int squash_mount_table_cached(bool fresh, int (*use)(const struct squash_mount_table *t, void *arg),
			      void *arg, char *why, size_t whylen);

/* How many times this process read the table for it (the tests). */
unsigned long squash_mount_table_cache_reads(void);

#endif

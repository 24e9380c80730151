/* Reading a mountinfo file a line at a time, keeping what the caller
 * needs. The table is not squashd's alone: any user with a process in the
 * namespace adds lines (their own FUSE mounts, mount points of 4 KiB whose
 * spaces the kernel writes four bytes each), so a read of a fixed size
 * could end before squashd's own mounts, and a read of any size holds the
 * whole table in memory. squashd wants a few lines of it: its own mounts,
 * the cgroup file systems, or a number per mount. */
#ifndef SQUASHD_MOUNTINFO_KEPT_H
#define SQUASHD_MOUNTINFO_KEPT_H

#include <stdbool.h>

#include "mountinfo.h"

/* Calls each(m, ctx) for every line of the file at path that parses, in
 * order, until it returns non-zero. 0, or -1 when the file cannot be
 * opened. */
int mountinfo_each(const char *path, int (*each)(const struct squash_mount *m, void *ctx), void *ctx);

/* The lines of the file at path that keep(m, ctx) keeps, as one text
 * (malloc'd), or NULL when the file cannot be read or memory runs out. */
char *mountinfo_kept(const char *path, bool (*keep)(const struct squash_mount *m, void *ctx), void *ctx);

/* A keep() for mounts at or below the directory ctx (a path without a
 * trailing slash). */
bool mountinfo_below(const struct squash_mount *m, void *dir);

#endif

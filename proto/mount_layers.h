/* The directories a stacking mount reads through, as its mountinfo line
 * shows them: an overlay's lowerdir= (colon-separated, overlayfs' own
 * backslash escapes, "::" before data-only layers), lowerdir+=,
 * datadir+=, upperdir= and workdir=; the source of ecryptfs and shiftfs.
 * A file on such a mount is served, and flushed on close, by the file
 * systems below (issue 37). */
#ifndef SQUASH_MOUNT_LAYERS_H
#define SQUASH_MOUNT_LAYERS_H

#include <stddef.h>

#include "mountinfo.h"

/* Called with each layer's path, decoded (not normalised); nonzero stops. */
typedef int (*squash_layer_fn)(const char *path, void *arg);

/* Calls fn for each directory mount m stacks on; none for a file system
 * that stacks on nothing. Returns 0, fn's nonzero value, or -1 with why
 * when the layers cannot be told (a stacking type whose layers mountinfo
 * does not show, an overlay option not understood, no lower layer). */
int squash_mount_layers(const struct squash_mount *m, squash_layer_fn fn, void *arg, char *why, size_t whylen);

#endif

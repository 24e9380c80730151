/* The registry on disk (STATE_DIR/state), so a restarted squashd adopts the
 * mounts and FUSE servers that outlived it. Text, one record per line,
 * paths percent-encoded; rewritten atomically (temp file + rename). */
#ifndef SQUASHD_STATE_FILE_H
#define SQUASHD_STATE_FILE_H

#include <stddef.h>

#include "registry/registry.h"

/* The registry as the file's text (malloc'd into *text). Returns 0 or -1. */
int state_file_format(const struct registry *r, char **text, size_t *len);

/* Writes text to path atomically and durably (temp file, fsync, rename).
 * Returns 0, or -1 with err. */
int state_file_write(const char *path, const char *text, size_t len, char *err, size_t errlen);

/* Both at once. */
int state_file_save(const struct registry *r, const char *path, char *err, size_t errlen);

/* Loads path into an empty registry; a missing file is an empty registry.
 * Returns 0, or -1 with err (the registry is then left empty). */
int state_file_load(struct registry *r, const char *path, char *err, size_t errlen);

#endif

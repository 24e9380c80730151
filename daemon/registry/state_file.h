/* The registry on disk (STATE_DIR/state), so a restarted squashd adopts the
 * mounts and FUSE servers that outlived it. Text, one record per line,
 * paths percent-encoded; rewritten atomically (temp file + rename).
 *
 * Versions: the first line is "squashd-state FORMAT". Within one format
 * the file only grows compatibly (docs/architecture.md, "State file"):
 * a newer squashd adds record kinds, or fields at the end of a record,
 * never changes what a known field means. A reader of the same format
 * ignores fields it does not know and keeps records of kinds it does not
 * know with their entry (the mount, job or scope whose record came last
 * before them; before any: the file's), writing them back after that
 * entry's known records, and dropping them when it drops the entry. A file
 * of another format, or one it cannot parse, is not read at all: the
 * caller keeps it aside (core/daemon.h says what it does then). */
#ifndef SQUASHD_STATE_FILE_H
#define SQUASHD_STATE_FILE_H

#include <stddef.h>

#include "registry/registry.h"

/* The format this squashd reads and writes. 1: since slurm-squash 0.1.0. */
#define STATE_FILE_FORMAT 1

/* The registry as the file's text (malloc'd into *text). Returns 0 or -1. */
int state_file_format(const struct registry *r, char **text, size_t *len);

/* Writes text to path atomically and durably (temp file, fsync, rename).
 * Returns 0, or -1 with err. */
int state_file_write(const char *path, const char *text, size_t len, char *err, size_t errlen);

/* Both at once. */
int state_file_save(const struct registry *r, const char *path, char *err, size_t errlen);

/* Loads path into an empty registry; a missing file is an empty registry.
 * Returns 0; -1 with err when it cannot be read or parsed; -2 with err
 * when it is of another format version. The registry is left empty on
 * failure. */
int state_file_load(struct registry *r, const char *path, char *err, size_t errlen);

/* Only the first line of path: 0 when it is a state file of this format,
 * -2 (with *format) when it is one of another format, -1 otherwise (no
 * state file, cannot be read). Reads at most one line. */
int state_file_probe_format(const char *path, unsigned *format);

#endif

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
 * of another format, or one that is no state file, is not read at all:
 * the caller keeps it aside (core/daemon.h says what it does then).
 *
 * Round trip: loading what state_file_format wrote gives back every
 * entry it keeps (state_file_keeps_mount, state_file_keeps_entry) with
 * the same fields, references to mounts it does not keep left out (the
 * vanished-mount case of core/adopt.c). tests/unit/
 * test_state_file_round_trip.c checks it on random registries.
 *
 * A record it cannot read fails closed for its entry only: the mount,
 * job or scope it belongs to is dropped with all its records (never half
 * an entry), references to a dropped mount are left out, and every other
 * user's entries and sharing load. Dropping one entry costs what the
 * whole-file rebuild costs everyone (its mounts are detached as unknown,
 * its holders keep their own copies), so one damaged record, or one that
 * some user's strings provoke, no longer costs every user their sharing.
 * Only a file that is not a state file, of another format, or unreadable
 * is refused whole. */
#ifndef SQUASHD_STATE_FILE_H
#define SQUASHD_STATE_FILE_H

#include <stddef.h>

#include "registry/registry.h"

/* The format this squashd reads and writes. 1: since slurm-squash 0.1.0. */
#define STATE_FILE_FORMAT 1

/* What the file keeps: mounts READY or LINGERING; jobs, steps and
 * sessions not pending, or settling (made, their answer waits for the
 * save). */
bool state_file_keeps_mount(const struct mount_entry *m);
bool state_file_keeps_entry(const struct job_entry *e);

/* Escaping makes a field's byte at most this many bytes in the file. */
#define STATE_FILE_ESCAPE_MAX 3

/* The registry as the file's text (malloc'd into *text). Returns 0 or -1. */
int state_file_format(const struct registry *r, char **text, size_t *len);

/* The bytes entry e's records take in the file, as written (escaping
 * included), whether or not it is kept yet. */
size_t state_file_entry_bytes(const struct job_entry *e);

/* The bytes image i's record of e takes in the file, as written. */
size_t state_file_image_bytes(const struct job_entry *e, size_t i);

/* Writes text to path atomically and durably (temp file, fsync, rename).
 * Returns 0, or -1 with err. */
int state_file_write(const char *path, const char *text, size_t len, char *err, size_t errlen);

/* Both at once. */
int state_file_save(const struct registry *r, const char *path, char *err, size_t errlen);

/* Loads path into an empty registry; a missing file is an empty registry.
 * Returns 0; 1 when some entries were dropped for records it could not
 * read (err: how many and the first one's line and reason); -1 with err
 * when it cannot be read or is no state file; -2 with err when it is of
 * another format version. The registry is left empty on -1 and -2. */
int state_file_load(struct registry *r, const char *path, char *err, size_t errlen);

/* Only the first line of path: 0 when it is a state file of this format,
 * -2 (with *format) when it is one of another format, -1 otherwise (no
 * state file, cannot be read). Reads at most one line. */
int state_file_probe_format(const char *path, unsigned *format);

#endif

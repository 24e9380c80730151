/* What the prolog leaves for the job's steps when it could not reach
 * squashd at all: squashd cannot record that itself, and without it a step
 * could not tell "squashd was down during the prolog" from "the prolog
 * never ran". A small root-owned file per job next to squashd's socket
 * (DIR/prolog-unreached/JOBID); the epilog removes it. */
#ifndef SPANK_SQUASH_PROLOG_NOTE_H
#define SPANK_SQUASH_PROLOG_NOTE_H

#include <stddef.h>
#include <stdint.h>

#include "plugin_settings.h"

void prolog_note_write(const struct squash_settings *s, uint32_t job_id, const char *reason);

/* Copies the note's text into buf; returns 0, or -1 when there is none. */
int prolog_note_read(const struct squash_settings *s, uint32_t job_id, char *buf, size_t len);

void prolog_note_remove(const struct squash_settings *s, uint32_t job_id);

#endif

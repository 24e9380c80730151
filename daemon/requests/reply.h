/* An answer being built: the response and the arrays it owns; strings
 * are the reply's own (copied: it is sent after the registry lock is let
 * go, when what it describes may be gone). */
#ifndef SQUASHD_REPLY_H
#define SQUASHD_REPLY_H

#include <limits.h>

#include "imagespec.h"
#include "registry/registry.h"
#include "squash.pb-c.h"
#include "util/result.h"

struct status_extra; /* requests/status.c */

struct reply {
	Squash__Response resp;
	char message[SQUASH_PATH_MAX + 1024];
	Squash__NodeStatus node;
	char *problems[8];
	char problem_text[8][PATH_MAX + 256];
	struct status_extra *extra;  /* status: the operations view */
	char session_dir[PATH_MAX]; /* session_mount's answer */
};

void reply_init(struct reply *r);
void reply_error(struct reply *r, Squash__Status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Frees what the reply owns (any reply; safe to repeat). */
void reply_free(struct reply *r);

/* The status that tells the client a result: USER_ERROR or NODE_ERROR. */
Squash__Status reply_status_of(enum result r);

/* Appends e's mounts (a job's, a step's or a session's) to the answer,
 * each naming its node-level mount, or the job's overlay of a writable
 * image, and whether it is the step's own (lock held). Returns -1 with the
 * reply set to an error when one of them is unusable: lost while squashd
 * restarted, or its FUSE server died. */
int reply_add_mounts(struct reply *out, const struct job_entry *e);

/* Frees one list entry and what it owns. */
void reply_mount_info_free(Squash__MountInfo *mi);

#endif

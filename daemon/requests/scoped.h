/* What a step's and a session's mount requests share (requests/
 * step_images.c, requests/session_mount.c). */
#ifndef SQUASHD_SCOPED_H
#define SQUASHD_SCOPED_H

#include <stddef.h>

#include "requests/requests.h"

/* The end of a step's or session's mount request (lock held): keeps e
 * (pending until now) and answers its mounts, or drops it and answers why
 * (err, from res). who names the holder in the log ("step 12.3"). */
void scoped_finish_locked(struct request *rq, struct job_entry *e, enum result res, char *err,
			  size_t errlen, const char *who);

#endif

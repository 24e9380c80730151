/* Closing a descriptor that may lie on a user's FUSE mount (an image
 * file): close() sends FUSE_FLUSH and waits for the answer, which a
 * stopped or traced server never gives. Such a close runs on a detached
 * thread of its own, so no caller, and no lock it holds, waits for it.
 * Each such thread is counted for the user the descriptor is of while it
 * runs: a file system that never answers keeps it for ever, and
 * image_work_left.h bounds how many one user may leave so. */
#ifndef SQUASHD_CLOSE_DETACHED_H
#define SQUASHD_CLOSE_DETACHED_H

#include <stddef.h>
#include <sys/types.h>

/* Closes fd, a descriptor of owner's, on a thread of its own (or keeps
 * it open, logged, when no thread can be started: a leaked descriptor
 * beats a stalled squashd). */
void close_detached(uid_t owner, int fd);

/* How many of owner's closes have not returned yet. */
unsigned close_detached_running(uid_t owner);

struct close_detached_use {
	uid_t owner;
	unsigned running;
};

/* Up to max owners with closes running; how many were written. */
size_t close_detached_running_each(struct close_detached_use *out, size_t max);

#endif

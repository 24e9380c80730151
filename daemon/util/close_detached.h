/* Closing a descriptor that may lie on a user's FUSE mount (an image
 * file): close() sends FUSE_FLUSH and waits for the answer, which a
 * stopped or traced server never gives. Such a close runs on a detached
 * thread of its own, so no caller, and no lock it holds, waits for it. */
#ifndef SQUASHD_CLOSE_DETACHED_H
#define SQUASHD_CLOSE_DETACHED_H

/* Closes fd on a thread of its own (or keeps it open, logged, when no
 * thread can be started: a leaked descriptor beats a stalled squashd). */
void close_detached(int fd);

#endif

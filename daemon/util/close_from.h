/* Closes every descriptor from lowfd up, in a child before exec. */
#ifndef SQUASHD_CLOSE_FROM_H
#define SQUASHD_CLOSE_FROM_H

#include <stddef.h>

void close_from(int lowfd);

/* Closes every descriptor from 3 up but the n in keep (-1 entries are
 * skipped; at most CLOSE_ALL_BUT_MAX are kept). For a child of squashd
 * that does not exec and may be held by a user's file system: it must not
 * keep squashd's listening socket, other users' connections, kept
 * /dev/fuse descriptors or loop devices alive with it. */
#define CLOSE_ALL_BUT_MAX 8
void close_all_but(const int *keep, size_t n);

#endif

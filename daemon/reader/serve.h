/* squash-reader --serve SOCKET: one reader process for all of one user's
 * FUSE mounts on a node, so that 256 mounts are not 256 processes and a
 * new mount costs a message, not an exec. squashd sends each mount's image
 * and /dev/fuse descriptors over the socket (reader_wire.h); every mount
 * gets its own session, and one set of worker threads serves them all
 * (serve_pool.h), so the reader's threads do not grow with its mounts. The
 * process ends once squashd has closed its end and the last of its mounts
 * is gone. */
#ifndef SQUASH_READER_SERVE_H
#define SQUASH_READER_SERVE_H

#include "reader/session.h"

/* Serves mounts as they come on sock, with base's debug setting and
 * max_threads as the bound of all mounts' workers together (0: twice the
 * CPUs it may run on, within 8..64). Returns the exit status. */
int serve_run(int sock, const struct session_options *base);

#endif

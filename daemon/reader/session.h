/* The FUSE session of squash-reader: mounting (or taking the /dev/fuse
 * descriptor squashd passes), the worker threads, and resuming a
 * connection whose previous reader died (FUSE_NOTIFY_RESEND). */
#ifndef SQUASH_READER_SESSION_H
#define SQUASH_READER_SESSION_H

#include <stdbool.h>

#include "reader/ops.h"

struct session_options {
	const char *mountpoint;  /* a directory, or /dev/fd/N (a mounted /dev/fuse) */
	const char *mount_opts;  /* extra -o options when mounting a directory */
	unsigned max_threads;    /* worker threads at most; 1: single-threaded */
	bool resume;             /* /dev/fd/N already answered FUSE_INIT */
	bool own_signals;        /* the only session: SIGINT, SIGTERM end it cleanly */
	bool debug;
};

/* Serves rd until the file system is unmounted or a signal ends it.
 * Returns the process exit status. */
int session_run(struct reader *rd, const struct session_options *opt);

/* Whether this build can serve over io_uring (libfuse >= 3.18). */
bool session_io_uring_built(void);

#endif

/* The FUSE session of squash-reader: mounting (or taking the /dev/fuse
 * descriptor squashd passes), the worker threads of a reader serving one
 * mount, and resuming a connection whose previous reader died
 * (FUSE_NOTIFY_RESEND). */
#ifndef SQUASH_READER_SESSION_H
#define SQUASH_READER_SESSION_H

#include <stdbool.h>

#include "reader/ops.h"

struct session_options {
	const char *mountpoint;  /* a directory, or /dev/fd/N (a mounted /dev/fuse) */
	const char *mount_opts;  /* extra -o options when mounting a directory */
	unsigned max_threads;    /* worker threads at most; 1: single-threaded
				  * (serve.h: of all mounts; 0 its default) */
	unsigned poll_us;        /* a scan followed to its CPU, else polled for this long;
				  * 0: neither (serve_pool.h) */
	bool resume;             /* /dev/fd/N already answered FUSE_INIT */
	bool own_signals;        /* the only session: SIGINT, SIGTERM end it cleanly */
	enum plus_mode plus;     /* which READDIRPLUS entries go linked (plus_policy.h) */
	bool debug;
};

struct session;

/* Starts serving rd on opt->mountpoint: the session is made and attached
 * (a resumed connection taken over), no request read yet. NULL (said on
 * stderr) when it cannot start. */
struct session *session_open(struct reader *rd, const struct session_options *opt);

/* Serves requests until the file system is unmounted or (own_signals)
 * SIGINT, SIGTERM or SIGHUP ends it, with a pool of its own (serve_pool.h).
 * Returns the exit status. */
int session_serve(struct session *s);

/* s's libfuse session, for serving it elsewhere (serve_pool.h) instead of
 * session_serve. */
struct fuse_session *session_fuse(struct session *s);

/* Lets go of the connection (closing its descriptor) and frees s. */
void session_close(struct session *s);

/* session_open, session_serve, session_close. */
int session_run(struct reader *rd, const struct session_options *opt);

#endif

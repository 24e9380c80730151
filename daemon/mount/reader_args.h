/* What squashd's settings add to the command line of the squash-reader it
 * starts per user (reader_pool.c): --poll-us (reader_poll_us) and
 * --profile-cache (start_profile_cache), each only when the probe found
 * the reader takes it (fuse_reader.h), and never for squashfuse_ll, which
 * is never pooled. For readers started from then on: a reload changes
 * them, running readers keep theirs. */
#ifndef SQUASHD_READER_ARGS_H
#define SQUASHD_READER_ARGS_H

#include "profile_cache_path.h"

/* poll_us -1, profile_cache NULL or empty: not passed. */
void reader_args_set(int poll_us, const char *profile_cache);

struct reader_args {
	char poll[16];
	char cache[PROFILE_CACHE_TEMPLATE_MAX + 1];
	char *argv[8]; /* NULL-terminated; points into this struct */
};

/* The argv of a pooled reader ("squashfuse_ll --serve /dev/fd/3 ..."),
 * with the settings of now. */
void reader_args_fill(struct reader_args *a);

#endif

/* Which FUSE server squashd runs for user images, and how fast it can be:
 * squashfuse_ll before 0.2 serves one request at a time; from 0.3 on (0.2
 * when built so) it is multithreaded unless told -s, which squashd never
 * passes. Found once at start by running the configured binary with -h,
 * and reported per mount by `squashctl list` (docs/performance.md). */
#ifndef SQUASHD_FUSE_READER_H
#define SQUASHD_FUSE_READER_H

#include <stdbool.h>
#include <stddef.h>

struct fuse_reader {
	bool version_known;
	unsigned major, minor, patch;
	bool multithreaded;
	bool resumes;  /* squash-reader: can take over a live connection (--resume) */
	bool serves_many; /* squash-reader: serves all of a user's mounts (--serve) */
	bool unions;      /* squash-reader: serves several images as one mount (--union) */
	bool polls;       /* squash-reader: takes --poll-us (an older build would refuse it) */
	bool learns;      /* squash-reader: takes --profile-cache (the same) */
	char description[64]; /* "squashfuse_ll 0.6.2, multithreaded" */
};

/* Reads what `squashfuse_ll -h` printed (its first line names the
 * version; multithreaded builds list -s among the FUSE options), or
 * `squash-reader -h` (first line "squash-reader 0.1.0 (slurm-squash),
 * multithreaded"). */
void fuse_reader_parse(const char *help, struct fuse_reader *out);

/* Runs path -h as nobody (bounded output and time) and parses it. Never
 * fails: no answer, or one naming no version, counts as single-threaded
 * ("squashfuse_ll (version unknown)") and is logged as a warning. */
void fuse_reader_probe(const char *path, struct fuse_reader *out);

/* What `squashctl list` calls the kernel's reader. */
#define KERNEL_READER_DESCRIPTION "kernel squashfs"

#endif

/* One squash-reader per user and node: the FUSE mounts of one user's
 * images are all served by one reader process (`squash-reader --serve`,
 * daemon/reader/serve.h), started as that user on the first of them. A new
 * mount then costs a message over a socket pair instead of an exec, and
 * 256 mounts are not 256 processes (docs/architecture.md, "One reader per
 * user"). squashd still opens the image as the user and mounts /dev/fuse
 * itself; the reader only ever gets the two descriptors.
 *
 * A reader takes SERVE_MOUNTS_MAX (512) mounts at most (proto/reader_wire.h:
 * libfuse spends a thread key per session, and a process has 1,024): a
 * user's mounts past that start a second reader, and so on.
 *
 * The module counts the mounts each reader serves. A reader is let go
 * (its socket closed) when the last of them goes; it then exits, and the
 * caller stops it like any other server. A reader that fails to answer
 * is retired: later mounts get a new one, its own go on. */
#ifndef SQUASHD_READER_POOL_H
#define SQUASHD_READER_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "process/identity.h"
#include "util/result.h"

/* Hands the image and the mounted /dev/fuse connection fuse_fd to id's
 * reader (reader_path), starting one when there is none, and waits for
 * its answer until deadline_ms (monotonic); once served, hands it root_fd
 * (-1: none), the mount's root (O_PATH) to walk the image's
 * start profile through (reader_wire.h SERVE_ROOT). Not at all when resume
 * (the connection's previous reader died: resent requests wait for the
 * new one, and a dead reader's watcher must not wait on a live one). On
 * RESULT_OK stores the reader's pid and a pidfd of it (the caller's). The
 * descriptors stay the caller's. RESULT_USER_ERROR: the reader could not
 * read the image. */
enum result reader_pool_serve(const struct identity *id, const char *reader_path, int image_fd,
			      int fuse_fd, int root_fd, bool resume, long long deadline_ms, pid_t *pid,
			      int *pidfd, char *err, size_t errlen);

/* The same for a union of n images (image_fds, the last on top) served as
 * one mount (proto/reader_wire.h SERVE_UNION); only for a reader whose
 * probe found unions (fuse_reader.h). RESULT_USER_ERROR: the reader could
 * not read one of the images (the message says which, counting from 1). */
enum result reader_pool_serve_union(const struct identity *id, const char *reader_path,
				    const int *image_fds, size_t n, int fuse_fd, bool resume,
				    long long deadline_ms, pid_t *pid, int *pidfd, char *err,
				    size_t errlen);

/* Before n mounts of id's dead reader are resumed: holds room for them
 * in id's readers, starting those they need (SERVE_MOUNTS_MAX mounts
 * each), without squashd's lock; each resume takes one place. The
 * resumes run under that lock, where no reader is started: a user who
 * ends each new reader at once would otherwise have squashd start
 * readers under the lock every request takes, once per mount. */
enum result reader_pool_prepare(const struct identity *id, const char *reader_path, unsigned n, char *err,
				size_t errlen);

/* The restart is over: the places held for uid go, and the readers
 * reader_pool_prepare started that were handed no mount (fewer mounts to
 * resume than counted) are let go. */
void reader_pool_release_unused(uid_t uid);

/* A mount adopted after a squashd restart is served by pid (a reader the
 * previous squashd started; it may serve several). */
void reader_pool_adopt(pid_t pid, uid_t uid);

/* A mount of uid's served by pid goes. Returns true when the server
 * process should be stopped once the mount is gone: it served its last
 * mount, or it is not a pooled reader (squashfuse_ll: one process per
 * mount). */
bool reader_pool_put(pid_t pid, uid_t uid);

/* pid exited: forget its pool (its mounts are restarted or dead); not a
 * pool whose reader runs, another process that got the pid since. */
void reader_pool_died(pid_t pid);

/* How many reader processes serve pooled mounts (for status). */
unsigned reader_pool_count(void);

#endif

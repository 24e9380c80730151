/* Opening a user-named image with the user's rights only.
 *
 * A child process drops to the job user's identity, opens the path with
 * O_PATH|O_NOFOLLOW, checks it is a regular file, reopens it read-only
 * through /proc/self/fd (so FIFOs and devices are never opened for reading),
 * and passes the descriptor back over a socketpair (SCM_RIGHTS). Root never
 * opens the path. Everything afterwards works on the returned descriptor.
 * The child is forked by the spawner (process/spawner.h) when it runs. */
#ifndef SQUASHD_IMAGE_OPEN_H
#define SQUASHD_IMAGE_OPEN_H

#include <sys/stat.h>

#include <stddef.h>
#include <stdint.h>

#include "process/identity.h"
#include "process/spawner.h"
#include "util/result.h"
#include "superblock.h"

/* The image's first bytes as the opening child read them. */
struct image_header {
	int read_errno; /* 0, or why reading failed */
	size_t len;
	uint8_t bytes[SQUASH_SUPERBLOCK_SIZE];
};

/* On RESULT_OK sets *fd_out (O_RDONLY|O_CLOEXEC), *st (fstat of it) and,
 * when header is not NULL, the first SQUASH_SUPERBLOCK_SIZE bytes.
 * User errors carry a reason naming the image, e.g. "image /x/a.sqfs: not
 * readable by user alice: Permission denied", "... is a symbolic link",
 * "... is a directory, not a regular file". Gives up after timeout_ms
 * (a hung filesystem is a node error). */
enum result image_open_as_user(const char *path, const struct identity *id,
			       int timeout_ms, int *fd_out, struct stat *st,
			       struct image_header *header, char *err,
			       size_t errlen);

/* The opener as the spawner runs it (register as SPAWNER_OPEN_IMAGE). */
extern const struct spawner_op image_open_spawner_op;

#endif

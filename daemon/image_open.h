/* Opening a user-named image with the user's rights only.
 *
 * A child process drops to the job user's identity, opens the path with
 * O_PATH|O_NOFOLLOW, checks it is a regular file, reopens it read-only
 * through /proc/self/fd (so FIFOs and devices are never opened for reading),
 * and passes the descriptor back over a socketpair (SCM_RIGHTS). Root never
 * opens the path. Everything afterwards works on the returned descriptor. */
#ifndef SQUASHD_IMAGE_OPEN_H
#define SQUASHD_IMAGE_OPEN_H

#include <sys/stat.h>

#include "identity.h"
#include "result.h"

/* On RESULT_OK sets *fd_out (O_RDONLY|O_CLOEXEC) and *st (fstat of it).
 * User errors carry a reason naming the image, e.g. "image /x/a.sqfs: not
 * readable by user alice: Permission denied", "... is a symbolic link",
 * "... is a directory, not a regular file". Gives up after timeout_ms
 * (a hung filesystem is a node error). */
enum result image_open_as_user(const char *path, const struct identity *id,
			       int timeout_ms, int *fd_out, struct stat *st,
			       char *err, size_t errlen);

#endif

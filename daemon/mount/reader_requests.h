/* The messages squashd sends a user's reader (proto/reader_wire.h) and
 * the answers it waits for, on the socket pair reader_pool.c keeps per
 * reader. The reader runs as the user, who may stop it or make it send
 * anything: nothing here waits past its deadline. */
#ifndef SQUASHD_READER_REQUESTS_H
#define SQUASHD_READER_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "reader_wire.h"
#include "util/result.h"

/* One serve_request of flags with the n (1 or 2) descriptors fds. Never
 * waits: a reader that stopped reading is not waited for. 0 or -1. */
int reader_send_request(int sock, uint32_t id, uint32_t flags, const int *fds, size_t n);

/* A union of n images (parts of SERVE_UNION_PART image descriptors, the
 * last with fuse_fd after its images). A part the socket cannot take now
 * waits for room until deadline_ms: a union of 1,024 images is 5
 * messages carrying 1,025 descriptors. 0 or -1 (errno). */
int reader_send_union(int sock, uint32_t id, bool resume, const int *image_fds, size_t n, int fuse_fd,
		      long long deadline_ms);

/* Waits for the answer to request id from reader pid (its pidfd) until
 * deadline_ms (the caller holds the reader's io lock). Late answers to
 * requests whose waiter gave up are skipped; anything malformed is the
 * reader's failure. *timed_out: it stayed silent long enough to be
 * killed. RESULT_USER_ERROR: the reader could not read the image. */
enum result reader_await_reply(int sock, int pidfd, pid_t pid, uint32_t id, long long deadline_ms, char *err,
			       size_t errlen, bool *timed_out);

#endif

/* Starting a FUSE server (squashfuse_ll, squash-reader) as the job user:
 * in a child that shares squashd's memory until it execs (child_vfork, so
 * squashd's page tables are not copied), in a session of its own, with
 * default signals, and with only the descriptors it is given. */
#ifndef SQUASHD_SERVER_SPAWN_H
#define SQUASHD_SERVER_SPAWN_H

#include <sys/types.h>

#include "process/identity.h"

/* The descriptor numbers the server gets; fixed so its argv is known. */
#define SERVER_FD3 3
#define SERVER_FD4 4

/* Exit codes of a child that failed before exec (servers never use them
 * for their own errors: squashfuse_ll exits 1 on a bad image). */
#define SERVER_BECOME_FAILED 126
#define SERVER_EXEC_FAILED 127

/* Starts path with argv as id, with fd3 as its descriptor 3, fd4 (unless
 * -1) as its descriptor 4, stdin on /dev/null, squashd's stdout and
 * stderr, and nothing else. Returns its pid, with a pidfd in *pidfd, or
 * -1 (errno). Failures after the fork are logged, and the child exits
 * with SERVER_BECOME_FAILED or SERVER_EXEC_FAILED. */
pid_t server_spawn(int fd3, int fd4, const struct identity *id, const char *path,
		   char *const *argv, int *pidfd);

#endif

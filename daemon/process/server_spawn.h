/* Starting a FUSE server (squash-reader, squashfuse_ll) as the job user.
 *
 * The server is made by the spawner (process/spawner.h), a process of its
 * own, as squashd's child (CLONE_PARENT, with its pidfd from clone3), and
 * squashd waits only for the spawner's pidfd message, never for the
 * child: a user who stops or traces the child while it becomes theirs
 * (between its identity drop and exec) holds that child only, not a
 * thread or a lock of squashd, and not squashd's memory (vfork's). When
 * there is no spawner squashd forks (fork(), never vfork).
 *
 * The child runs in a session of its own with default signals, outside
 * squashd's OOM protection (oom_score_adj 0), in its user's reader cgroup
 * (process/reader_cgroup.h), with stdin on /dev/null, stdout and stderr
 * on a pipe squashd reads and logs as the server's (process/server_output.h,
 * rate-limited), and only the descriptors it is given. */
#ifndef SQUASHD_SERVER_SPAWN_H
#define SQUASHD_SERVER_SPAWN_H

#include <sys/types.h>

#include "process/identity.h"
#include "process/spawner.h"

/* The descriptor numbers the server gets; fixed so its argv is known. */
#define SERVER_FD3 3
#define SERVER_FD4 4

/* Exit codes of a child that failed before exec (servers never use them
 * for their own errors: squashfuse_ll exits 1 on a bad image). The reason
 * is in squashd's log, from the child's stderr. */
#define SERVER_BECOME_FAILED 126
#define SERVER_EXEC_FAILED 127

/* Starts path with argv as id, with fd3 as its descriptor 3, fd4 (unless
 * -1) as its descriptor 4. Returns its pid, with a pidfd in *pidfd, or -1
 * (errno). Failures after the fork are logged, and the child exits with
 * SERVER_BECOME_FAILED or SERVER_EXEC_FAILED. */
pid_t server_spawn(int fd3, int fd4, const struct identity *id, const char *path,
		   char *const *argv, int *pidfd);

/* The spawner's op that runs the child (main.c registers it). */
extern const struct spawner_op server_spawner_op;

#endif

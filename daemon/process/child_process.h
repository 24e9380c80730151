/* squashd's children (image openers, FUSE probes, FUSE servers), tracked by
 * pidfd. Each thread waits for its own children with a deadline, woken by
 * the child's exit rather than by polling, and nobody calls waitpid(-1):
 * it would steal the exit of a child another thread is waiting for. */
#ifndef SQUASHD_CHILD_PROCESS_H
#define SQUASHD_CHILD_PROCESS_H

#include <stdbool.h>
#include <sys/types.h>

/* A pidfd for pid (close-on-exec), or -1 with errno. For a child that has
 * not been reaped the pid cannot have been reused, so this is race-free. */
int child_pidfd(pid_t pid);

/* Whether the process behind pidfd has exited (its pidfd is readable);
 * true for -1, whose process is not known. Tells a dead process from a
 * new one that got its pid: a pid alone names whoever holds it now. */
bool child_exited(int pidfd);

/* Waits until the process behind pidfd exits or deadline_ms (monotonic)
 * passes, or squashd is asked to stop. Returns 1 when it exited (and, when
 * it is our child, reaps it and stores a wait(2)-style status in *status,
 * or -1 there when it was not our child), or 0 (timeout, stop, error). */
int child_wait(int pidfd, long long deadline_ms, int *status);

/* Waits until fd is readable or hung up (a child's answer on a pipe, or a
 * pidfd: the child exited), deadline_ms (monotonic) passes, or squashd is
 * asked to stop. Returns 1 when fd is ready, 0 on timeout, -1 on stop or
 * error. */
int child_wait_readable(int fd, long long deadline_ms);

/* SIGKILL through the pidfd (never hits a recycled pid). */
void child_kill(int pidfd);

/* Gives up on a child that may take a while to die (stuck in a hung file
 * system): kills it, and reaps it in the background when it finally exits.
 * Takes ownership of pidfd. (In child_abandon.c: it hands the child to
 * the process watcher, which waits with the functions above.) */
void child_abandon(int pidfd);

/* The descriptor that becomes readable when squashd is stopping; waits in
 * child_wait and elsewhere give up then. -1 (the default): never. */
void child_set_stop_fd(int fd);
int child_stop_fd(void);

/* In a child about to exec a program of its own (a FUSE server, a
 * prefetch): a session of its own, so that signals aimed at squashd's
 * process group (a terminal, a restart) do not reach it, every signal's
 * default action and none blocked (squashd's threads block some). */
void child_detach_signals(void);

/* In such a child, still root: squashd's OOM protection is squashd's, not
 * the child's (raising the score needs no privilege). 0, or an errno. */
int child_drop_oom_protection(void);

/* Like fork(), but the child starts with the given pidfd in *pidfd. */
pid_t child_fork(int *pidfd);

#endif

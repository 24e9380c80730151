/* The process whose life bounds a step's or a session's images: a step's
 * slurmstepd (if it dies without its end of step, the step's images go),
 * a squash-shell process (when it exits, however, its session goes).
 * Watched through a pidfd (process/process_watch.h); a process is named by
 * its pid and start time, so a reused pid is never mistaken for it. */
#ifndef SQUASHD_HOLDER_WATCH_H
#define SQUASHD_HOLDER_WATCH_H

#include <sys/types.h>

#include "core/daemon.h"

/* Start time of pid in clock ticks since boot (field 22 of /proc/PID/stat),
 * 0 when unknown. */
unsigned long long holder_start_time(pid_t pid);

/* A pidfd for the peer pid of the connection fd (SO_PEERPIDFD, or by pid
 * on kernels before 6.5), or -1, also when the peer is gone already. */
int holder_peer_pidfd(int fd, pid_t pid);

/* Watches e's process (e->session_pid; takes pidfd): when it exits, e is
 * released. Returns 0, or -1 (pidfd closed). */
int holder_watch(struct daemon_state *ds, const struct job_entry *e, int pidfd);

#endif

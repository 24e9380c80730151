/* Ends a cgroup and everything in it: a reader's cgroup when the reader
 * is gone, so nothing it forked outlives it (issue 37). */
#ifndef SQUASHD_CGROUP_KILL_H
#define SQUASHD_CGROUP_KILL_H

/* Kills every process of the cgroup directory dir (cgroup.kill on v2,
 * else SIGKILL to each process cgroup.procs lists, until it lists none)
 * and removes dir; gives up at deadline_ms (monotonic). A process is
 * signalled only through a pidfd that still names a member of dir.
 * Returns the number of processes killed, or -1 (logged) when dir could
 * not be emptied or removed in time. A missing dir is no error. */
int cgroup_kill_all(const char *dir, long long deadline_ms);

#endif

/* What each user's FUSE servers' cgroup (or systemd slice) counts, read
 * from cgroupfs for squashctl status and for the cause of a reader's
 * death. Only cgroupfs is read, which waits on no user. */
#ifndef SQUASHD_READER_CGROUP_USAGE_H
#define SQUASHD_READER_CGROUP_USAGE_H

#include <sys/types.h>

/* - CPU time: cgroup v2's cpu.stat usage_usec, v1's cpuacct.usage;
 * - memory in use: memory.current, v1's memory.usage_in_bytes (the page
 *   cache of the images they read included), against reader_memory_max;
 * - OOM kills: the processes the kernel's OOM killer ended there
 *   (memory.events, v1's memory.oom_control: oom_kill; those of the
 *   user's ended readers included). */
enum reader_usage_kind { READER_USAGE_CPU_MS, READER_USAGE_MEMORY_BYTES, READER_USAGE_OOM_KILLS };

/* Calls fn(arg, uid, kind, value) for each user whose cgroup exists now
 * and counts kind (those of readers that ended included, while the
 * user's cgroup stays). */
typedef void (*reader_usage_fn)(void *arg, uid_t uid, enum reader_usage_kind kind, unsigned long long value);
void reader_cgroup_usage(enum reader_usage_kind kind, reader_usage_fn fn, void *arg);

/* The OOM kills in uid's cgroup so far, or -1 (no cgroup, no memory
 * controller): the likely cause when a reader dies of SIGKILL. */
long long reader_cgroup_oom_kills(uid_t uid);

/* Reader pid of uid has ended and its cgroup is about to go
 * (reader_cgroup_end): under cgroup v1, keeps what that cgroup counted
 * for the user's total. */
void reader_cgroup_usage_reader_ending(uid_t uid, pid_t pid);

#endif

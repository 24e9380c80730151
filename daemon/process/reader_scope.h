/* Under systemd with cgroup v2: each user's FUSE servers in a slice of
 * their own, made through systemd's D-Bus API, so that systemd (which owns
 * every cgroup of the host there) knows them, squashd.service stays a
 * plain service that systemd can restart and upgrade while readers serve
 * running jobs, and readers count against their user's limits, never
 * against squashd.service's TasksMax:
 *
 *   squashd.slice/squashd-readers.slice/squashd-readers-u<UID>.slice
 *       TasksMax=reader_tasks_max, MemoryMax=reader_memory_max,
 *       CPUWeight=reader_cpu_weight
 *     squashd-reader-u<UID>-<PID>.scope     one per reader process
 *
 * A reader joins its scope itself, while still root and before it becomes
 * the user (process/server_spawn.c): it sets the user's slice's limits
 * (making the slice when missing), then asks for a scope holding its own
 * pid, and waits until the kernel shows it there. A slice stays until
 * squashd stops with none of its readers left (reader_scope_cleanup). */
#ifndef SQUASHD_READER_SCOPE_H
#define SQUASHD_READER_SCOPE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define READER_SCOPE_PARENT_SLICE "squashd-readers.slice"
#define READER_SCOPE_UNIT_MAX 128

/* Whether this process runs under systemd as PID 1 (sd_booted). */
int reader_scope_systemd_running(void);

/* The user's slice: "squashd-readers-u<uid>.slice", or with instance
 * ("" for the node's one squashd) "squashd-readers-<instance>_u<uid>.slice". */
int reader_scope_slice_name(const char *instance, uid_t uid, char *out, size_t len);

/* In the reader's process, as root: into a new scope of slice with those
 * limits (0: none). Returns 0, or -1 with the reason in why. */
int reader_scope_join(const char *slice, uid_t uid, uint64_t tasks_max, uint64_t memory_max,
		      uint64_t cpu_weight, char *why, size_t whylen);

/* The reader pid is gone: SIGKILL to whatever is left in its scope
 * (KillUnit, whom "all": every process of the scope's cgroup); the empty
 * scope then goes (CollectMode). A scope already gone is no error. */
void reader_scope_end(uid_t uid, pid_t pid);

/* The scope of uid's reader pid: squashd-reader-u<UID>-<PID>.scope. The
 * uid is in it because a reader's death is handled on its user's thread,
 * which that user may keep busy: another user's new reader may have the
 * pid by then, and must not have the scope that is ended. */
void reader_scope_unit_name(uid_t uid, pid_t pid, char *out, size_t len);

/* At squashd's exit: stops the users' slices no reader is left in. base
 * is the parent slice's cgroup directory. */
void reader_scope_cleanup(const char *base);

#endif

/* Is this process a FUSE server squashd could have started for a user?
 * Asked before squashd adopts a running process as a mount's reader after
 * a restart, and before it signals one it did not start itself: the pid
 * in the state file may have been reused, and a user can name any
 * process of theirs squash-reader. So not the name but what the kernel
 * says: real, effective and saved uid all the user's (/proc/PID/status),
 * the executable one of the FUSE server binaries squashd is configured
 * with (device and inode of /proc/PID/exe, never followed into the
 * user's file systems: see reader_process.c), and, for one adopted, a
 * start before this squashd's (field 22 of /proc/PID/stat), so a process
 * started later can never be taken for one. Everything is read from
 * /proc through a directory descriptor and confirmed with the pidfd, so
 * a pid reused meanwhile answers for nothing. Nothing here can block on a
 * user's file system or a stopped process. */
#ifndef SQUASHD_READER_PROCESS_H
#define SQUASHD_READER_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum reader_kind {
	READER_NONE = 0,
	READER_SQUASH_READER, /* squash-reader: may serve many mounts, can resume */
	READER_SQUASHFUSE,    /* squashfuse_ll */
};

/* Records the two FUSE server binaries squashd may start (either may be
 * NULL or missing) and squashd's own start time. Once, at start-up,
 * before any thread; both are kept, since the squashd before this one
 * may have been configured with the other. */
void reader_process_init(const char *squash_reader, const char *squashfuse);

/* Which FUSE server the process of pidfd (pid) is, READER_NONE when it is
 * none squashd could have started for uid (why says why) or has ended.
 * adopted: it must also have started before this squashd. */
enum reader_kind reader_process_kind(int pidfd, pid_t pid, uid_t uid, bool adopted, char *why,
				     size_t whylen);

/* Whether pid's mount namespace is squashd's (as reader_process_init
 * found it). */
bool reader_process_in_own_mount_ns(pid_t pid);

/* Start time (clock ticks since boot) of the process whose /proc
 * directory is proc_dir (a descriptor), 0 when unreadable. */
unsigned long long reader_process_start_time(int proc_dir);

/* Threads of a reader looked at for a stop, at most (its user's tasks
 * limit, reader_tasks_max, is usually far lower). */
#define READER_PROCESS_TASKS_LOOKED_AT 1024

/* Whether pid or one of its threads is stopped (state T: SIGSTOP; t: a
 * tracer's stop), from field 3 of /proc/PID/stat and of
 * /proc/PID/task/TID/stat, which take no lock the process can hold. */
bool reader_process_stopped(pid_t pid);

#endif

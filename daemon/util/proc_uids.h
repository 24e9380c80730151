/* A process's uids as the kernel holds them (/proc/PID/status), not the
 * owner of /proc/PID (root for any non-dumpable process). */
#ifndef SQUASHD_PROC_UIDS_H
#define SQUASHD_PROC_UIDS_H

#include <stdbool.h>
#include <sys/types.h>

/* Whether the real, effective and saved uids of the process whose /proc
 * directory proc_dir is are all uid; false when status cannot be read. */
bool proc_uids_are(int proc_dir, uid_t uid);

/* proc_uids_are, and the parent's pid into *ppid (0 when it has none in
 * this /proc), from the same read of status. */
bool proc_uids_are_with_parent(int proc_dir, uid_t uid, pid_t *ppid);

/* Whose process it is: root only when all three are 0, else the first of
 * them that is not (a set-uid-root program a user runs is the user's);
 * false when status cannot be read. */
bool proc_uids_owner(int proc_dir, uid_t *uid);

#endif

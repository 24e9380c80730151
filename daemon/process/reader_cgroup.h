/* A cgroup of its own for each user's FUSE servers, with the limits the
 * admin sets (reader_tasks_max, reader_memory_max): a user's reader that
 * forks without end or grows is held there, not in squashd's service,
 * whose TasksMax and memory squashd needs to serve everyone.
 *
 * Where: under cgroup v2, below squashd's own cgroup, which systemd
 * delegates (squashd.service: Delegate=yes): squashd moves itself to
 * <own>/daemon and makes <own>/readers/uid-<uid> (the v2 rule: no process
 * in a cgroup that hands controllers down). In the root cgroup (squashd
 * started by hand) it makes /squashd-readers.<node>/uid-<uid> (with a hash
 * of state_dir after <node> when that is not /run/squashd). Under
 * cgroup v1 (hybrid hosts) the same below its own cgroup of the pids and
 * memory hierarchies. The server joins while still root, before it drops
 * to the user (process/server_spawn.c). */
#ifndef SQUASHD_READER_CGROUP_H
#define SQUASHD_READER_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define READER_CGROUP_FILES 2 /* v2: one; v1: the pids and the memory hierarchy */

/* The cgroup.procs files a server writes "0" to ("" for none). */
struct reader_cgroup_join {
	char procs[READER_CGROUP_FILES][PATH_MAX];
};

/* Decides where (mode "auto" or "no"), once at start, before squashd's
 * threads (under a delegated cgroup v2 it moves every process of squashd's
 * cgroup, the spawner included, to daemon/). tasks_max 0 and memory_max
 * 0: no limit. Logs what it chose; returns 0, or -1 when readers run
 * without cgroups of their own. */
int reader_cgroup_init(const char *mode, const char *node_name, const char *state_dir,
		       unsigned tasks_max, unsigned long long memory_max);

/* The cgroup of uid's servers, made (with its limits) when missing.
 * Returns 0 with *join filled (all empty when cgroups are off), or -1
 * (logged): the server must not start outside its cgroup. */
int reader_cgroup_prepare(uid_t uid, struct reader_cgroup_join *join);

/* The base directory of the readers' cgroups ("" when off), for status. */
const char *reader_cgroup_base(void);

/* At exit: removes the users' cgroups no process is left in. */
void reader_cgroup_cleanup(void);

#endif

/* A cgroup of its own for each user's FUSE servers, with the limits the
 * admin sets (reader_tasks_max, reader_memory_max): a user's reader that
 * forks without end or grows is held there, not in squashd's service,
 * whose TasksMax and memory squashd needs to serve everyone.
 *
 * Where, decided once at start from /proc/self/mountinfo and
 * /proc/self/cgroup (process/cgroup_layout.h):
 * - under systemd (every Debian node: cgroup v2; also hybrid hosts):
 *   systemd owns the tree, so systemd makes the cgroups: a slice per user
 *   with its limits and a scope per reader (process/reader_scope.h),
 *   outside squashd.service, which stays a plain service systemd can
 *   restart under running readers, and whose TasksMax they never count in.
 * - cgroup v2 without systemd: below squashd's own cgroup when it is
 *   delegated (squashd moves itself to <own>/daemon, readers go to
 *   <own>/readers/uid-<uid>), or /squashd-readers.<node>/uid-<uid> when
 *   squashd runs in the root cgroup.
 * - cgroup v1 or hybrid without systemd (the test clusters): the same below squashd's own
 *   cgroup of the pids and memory hierarchies.
 * (<node> has a hash of state_dir after it when that is not /run/squashd.)
 * The server joins while still root, before it drops to the user
 * (process/server_spawn.c), into a cgroup of its own below the user's
 * (uid-<uid>/reader-<pid>, or its systemd scope), which squashd ends when
 * the server is gone: whatever it forked goes with it. */
#ifndef SQUASHD_READER_CGROUP_H
#define SQUASHD_READER_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define READER_CGROUP_FILES 3 /* v2: one; v1: the pids, memory and cpu hierarchies */

/* The user's cgroup directories ("" for none) a server makes a cgroup of
 * its own in (reader-<its pid>, which squashd ends with it); or, under
 * systemd, the user's slice it asks systemd for a scope in. */
struct reader_cgroup_join {
	char dirs[READER_CGROUP_FILES][PATH_MAX];
	char slice[128];
	uint64_t tasks_max, memory_max; /* the slice's limits; 0: none */
	uint64_t cpu_weight;            /* the slice's CPUWeight */
	uid_t uid;                      /* whose reader: in its scope's name */
};

/* Decides where (mode "auto" or "no"), once at start, before squashd's
 * threads (under a delegated cgroup v2 it moves every process of squashd's
 * cgroup, the spawner included, to daemon/). tasks_max 0 and memory_max
 * 0: no limit. Logs what it chose; returns 0, or -1 when readers run
 * without cgroups of their own. */
int reader_cgroup_init(const char *mode, const char *node_name, const char *state_dir,
		       unsigned tasks_max, unsigned long long memory_max);

/* The CPU weight of each user's cgroup from now on (1-10000, the
 * kernel's 100 the default: cpu.weight, CPUWeight=; on v1 cpu.shares
 * weight * 1024 / 100). Set before reader_cgroup_init. */
void reader_cgroup_set_cpu_weight(unsigned weight);

/* The cgroup of uid's servers, made (with its limits) when missing.
 * Returns 0 with *join filled (all empty when cgroups are off), or -1
 * (logged): the server must not start outside its cgroup. */
int reader_cgroup_prepare(uid_t uid, struct reader_cgroup_join *join);

/* The base directory of the readers' cgroups ("" when off), for status. */
const char *reader_cgroup_base(void);

/* Why readers run without cgroups of their own although reader_cgroups is
 * on ("" when they have them, or the admin turned them off): a health
 * problem. */
const char *reader_cgroup_problem(void);

/* In the reader's process, as root: joins what join names. Returns 0, or
 * -1 with the reason in why. */
int reader_cgroup_join(const struct reader_cgroup_join *join, char *why, size_t whylen);

/* The server pid of uid is gone (reaped): kills whatever is left in its
 * cgroup (its scope under systemd) and removes it. Waits on nothing of
 * the user's longer than READER_CGROUP_END_MS; run it on the user's
 * thread (process/user_executor.h). */
#define READER_CGROUP_END_MS 2000
void reader_cgroup_end(uid_t uid, pid_t pid);

/* Where the users' cgroups are, for reading what they count
 * (process/reader_cgroup_usage.h): "" bases when there are none. */
struct reader_cgroup_where {
	const char *cpu_base, *memory_base; /* the same under cgroup v2 */
	const char *instance;               /* in the names of systemd slices */
	bool unified, under_systemd;
};
void reader_cgroup_where(struct reader_cgroup_where *w);

/* reader_memory_max as in force (0: none). */
unsigned long long reader_cgroup_memory_limit(void);

/* At exit: removes the users' cgroups no process is left in. */
void reader_cgroup_cleanup(void);

#endif

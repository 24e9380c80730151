/* Where users' FUSE servers' cgroups go on this host: decided from the
 * texts of /proc/self/mountinfo and /proc/self/cgroup, whether systemd
 * runs, and squashd's instance name, with no file touched (the unit tests
 * feed it samples of v1, hybrid and v2 hosts). process/reader_cgroup.c
 * makes what the plan says. */
#ifndef SQUASHD_READER_CGROUP_PLAN_H
#define SQUASHD_READER_CGROUP_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#define READER_CGROUP_PATH_MAX 1024

enum reader_cgroup_kind {
	READER_CGROUPS_NONE,	     /* no cgroups for readers: why says why */
	READER_CGROUPS_SYSTEMD,	     /* systemd makes a slice per user, a scope per reader */
	READER_CGROUPS_V2_ROOT,	     /* squashd in the v2 root: a tree of its own there */
	READER_CGROUPS_V2_DELEGATED, /* below squashd's own v2 cgroup: daemon/ and readers/ */
	READER_CGROUPS_V1,	     /* below squashd's own cgroups of v1's pids and memory */
};

struct reader_cgroup_plan {
	enum reader_cgroup_kind kind;
	/* SYSTEMD: [0] the parent slice's directory (status, cleanup); V2_*:
	 * [0] where users' cgroups go; V1: [0] pids, [1] memory, [2] cpu
	 * ("" when the host has no v1 cpu hierarchy: no CPU weight then). */
	char bases[3][READER_CGROUP_PATH_MAX];
	char own[READER_CGROUP_PATH_MAX];        /* V2_DELEGATED: squashd's cgroup directory */
	char daemon_dir[READER_CGROUP_PATH_MAX]; /* V2_DELEGATED: where squashd moves itself */
	char why[512];
};

/* Fills plan; returns 0, or -1 with kind NONE and the reason in why.
 * instance: the name of squashd's tree ("node", or "node-HASH" for a
 * squashd with a state_dir of its own). */
int reader_cgroup_plan(const char *mountinfo, const char *proc_cgroup, bool systemd,
		       const char *instance, struct reader_cgroup_plan *plan);

#endif

/* What the host's cgroups look like, read from the text of
 * /proc/self/mountinfo and /proc/self/cgroup (pure functions: the unit
 * tests feed them samples of v1, v2 and hybrid hosts).
 *
 * - v2 (unified): cgroup2 mounted at /sys/fs/cgroup; /proc/self/cgroup has
 *   the one line "0::/path". Every Debian since 11 boots this way.
 * - v1: a cgroup (v1) mount per controller set below /sys/fs/cgroup.
 * - hybrid: the v1 controllers as above, plus a cgroup2 mount with no
 *   controllers (systemd's /sys/fs/cgroup/unified): for limits, v1. */
#ifndef SQUASHD_CGROUP_LAYOUT_H
#define SQUASHD_CGROUP_LAYOUT_H

#include <stddef.h>

enum cgroup_layout {
	CGROUP_LAYOUT_NONE, /* no cgroup file system at all */
	CGROUP_LAYOUT_V1,
	CGROUP_LAYOUT_HYBRID,
	CGROUP_LAYOUT_V2,
};

/* The layout the mountinfo text describes. */
enum cgroup_layout cgroup_layout_from_mountinfo(const char *mountinfo);

/* The mount point of the v1 hierarchy that carries controller (its super
 * options name it, e.g. "rw,pids"), in out. Returns 0, or -1 when none. */
int cgroup_v1_mount_point(const char *mountinfo, const char *controller, char *out, size_t len);

/* The process's cgroup in a hierarchy, from /proc/PID/cgroup text: for
 * controller NULL the v2 one ("0::PATH"), else the v1 line whose controller
 * list holds controller as a whole word ("pids", not "pids_x"). Returns 0
 * with the path in out, or -1. */
int cgroup_own_path(const char *proc_cgroup, const char *controller, char *out, size_t len);

#endif

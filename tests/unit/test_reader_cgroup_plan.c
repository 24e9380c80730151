/* Where readers' cgroups go on v2, hybrid and v1 hosts, with and without
 * systemd (daemon/process/reader_cgroup_plan.c): every path squashd would
 * make or ask systemd for, from real /proc texts. */
#include "config.h"

#include "process/reader_cgroup_plan.h"
#include "unit.h"
#include "cgroup_samples.h"

static struct reader_cgroup_plan plan;

static void check_under_systemd(void)
{
	/* Debian 12 and 13: systemd's slices, never squashd.service's own cgroup. */
	CHECK_INT(reader_cgroup_plan(v2_mountinfo, v2_cgroup, true, "node1", &plan), 0);
	CHECK_INT(plan.kind, READER_CGROUPS_SYSTEMD);
	CHECK_STR(plan.bases[0], "/sys/fs/cgroup/squashd.slice/squashd-readers.slice");
	CHECK_INT(reader_cgroup_plan(hybrid_mountinfo, hybrid_cgroup, true, "node1", &plan), 0);
	CHECK_INT(plan.kind, READER_CGROUPS_SYSTEMD);
	CHECK_STR(plan.bases[0], "/sys/fs/cgroup/unified/squashd.slice/squashd-readers.slice");
	CHECK_INT(reader_cgroup_plan(v1_mountinfo, v1_cgroup, true, "node1", &plan), 0);
	CHECK_INT(plan.kind, READER_CGROUPS_SYSTEMD);
	CHECK_STR(plan.bases[0], "/sys/fs/cgroup/systemd/squashd.slice/squashd-readers.slice");
}

static void check_v2_without_systemd(void)
{
	/* squashd started by hand in the root cgroup */
	CHECK_INT(reader_cgroup_plan(v2_mountinfo, "0::/\n", false, "node1", &plan), 0);
	CHECK_INT(plan.kind, READER_CGROUPS_V2_ROOT);
	CHECK_STR(plan.bases[0], "/sys/fs/cgroup/squashd-readers.node1");
	/* in a cgroup of its own (delegated by whatever started it) */
	CHECK_INT(reader_cgroup_plan(v2_mountinfo, v2_cgroup, false, "node1", &plan), 0);
	CHECK_INT(plan.kind, READER_CGROUPS_V2_DELEGATED);
	CHECK_STR(plan.own, "/sys/fs/cgroup/system.slice/squashd.service");
	CHECK_STR(plan.daemon_dir, "/sys/fs/cgroup/system.slice/squashd.service/daemon");
	CHECK_STR(plan.bases[0], "/sys/fs/cgroup/system.slice/squashd.service/readers");
	/* a v1 /proc/self/cgroup on a v2 mountinfo: no v2 line to go by */
	CHECK_INT(reader_cgroup_plan(v2_mountinfo, v1_cgroup, false, "node1", &plan), -1);
	CHECK_INT(plan.kind, READER_CGROUPS_NONE);
	CHECK_CONTAINS(plan.why, "no cgroup v2 line");
}

static void check_v1_without_systemd(void)
{
	/* The test clusters on this machine: below squashd's own pids and memory cgroups. */
	CHECK_INT(reader_cgroup_plan(hybrid_mountinfo, hybrid_cgroup, false, "vm-1a2b3c4d", &plan), 0);
	CHECK_INT(plan.kind, READER_CGROUPS_V1);
	CHECK_STR(plan.bases[0], "/sys/fs/cgroup/pids/slurm/node1/squashd-readers.vm-1a2b3c4d");
	CHECK_STR(plan.bases[1], "/sys/fs/cgroup/memory/process_api/4f77/squashd-readers.vm-1a2b3c4d");
	CHECK_INT(reader_cgroup_plan(v1_mountinfo, "11:pids:/\n5:memory:/\n", false, "n", &plan), 0);
	CHECK_STR(plan.bases[0], "/sys/fs/cgroup/pids/squashd-readers.n");
	CHECK_STR(plan.bases[1], "/sys/fs/cgroup/memory/squashd-readers.n");
	/* a v1 host without a memory hierarchy */
	CHECK_INT(reader_cgroup_plan("39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
				     "8:pids:/\n", false, "n", &plan), -1);
	CHECK_CONTAINS(plan.why, "no cgroup v1 memory hierarchy");
}

static void check_no_cgroups(void)
{
	CHECK_INT(reader_cgroup_plan("", "", true, "n", &plan), -1);
	CHECK_INT(plan.kind, READER_CGROUPS_NONE);
	CHECK_CONTAINS(plan.why, "no cgroup file system");
}

int main(void)
{
	check_under_systemd();
	check_v2_without_systemd();
	check_v1_without_systemd();
	check_no_cgroups();
	return unit_exit_code();
}

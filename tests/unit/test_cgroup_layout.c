/* The cgroup layout and squashd's own cgroup, read from real
 * /proc/self/mountinfo and /proc/self/cgroup texts of v1, hybrid and v2
 * hosts (daemon/process/cgroup_layout.c). */
#include "config.h"

#include "process/cgroup_layout.h"
#include "unit.h"
#include "cgroup_samples.h"

static void check_layouts(void)
{
	CHECK_INT(cgroup_layout_from_mountinfo(v2_mountinfo), CGROUP_LAYOUT_V2);
	CHECK_INT(cgroup_layout_from_mountinfo(hybrid_mountinfo), CGROUP_LAYOUT_HYBRID);
	CHECK_INT(cgroup_layout_from_mountinfo(v1_mountinfo), CGROUP_LAYOUT_V1);
	CHECK_INT(cgroup_layout_from_mountinfo(""), CGROUP_LAYOUT_NONE);
	CHECK_INT(cgroup_layout_from_mountinfo("garbage\n\n- - -\n"), CGROUP_LAYOUT_NONE);
	/* A container with cgroup2 only at some other place. */
	CHECK_INT(cgroup_layout_from_mountinfo("1 0 0:1 / /cg rw - cgroup2 none rw\n"), CGROUP_LAYOUT_V2);
}

static void check_v1_mount_points(void)
{
	char out[256];

	CHECK_INT(cgroup_v1_mount_point(hybrid_mountinfo, "pids", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup/pids");
	CHECK_INT(cgroup_v1_mount_point(v1_mountinfo, "memory", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup/memory");
	CHECK_INT(cgroup_v1_mount_point(v1_mountinfo, "cpu", out, sizeof(out)), 0);
	CHECK_STR(out, "/sys/fs/cgroup/cpu,cpuacct");
	CHECK_INT(cgroup_v1_mount_point(v2_mountinfo, "pids", out, sizeof(out)), -1);
	/* a whole item only: "net_cls" is no "net" */
	CHECK_INT(cgroup_v1_mount_point(v1_mountinfo, "net", out, sizeof(out)), -1);
	CHECK_INT(cgroup_v1_mount_point(v1_mountinfo, "memory", out, 5), -1);
}

static void check_own_paths(void)
{
	char out[256];

	/* The bug issue 29 found: the v2 line was never matched. */
	CHECK_INT(cgroup_own_path(v2_cgroup, NULL, out, sizeof(out)), 0);
	CHECK_STR(out, "/system.slice/squashd.service");
	CHECK_INT(cgroup_own_path(hybrid_cgroup, NULL, out, sizeof(out)), 0);
	CHECK_STR(out, "/");
	CHECK_INT(cgroup_own_path(hybrid_cgroup, "pids", out, sizeof(out)), 0);
	CHECK_STR(out, "/slurm/node1");
	CHECK_INT(cgroup_own_path(hybrid_cgroup, "memory", out, sizeof(out)), 0);
	CHECK_STR(out, "/process_api/4f77");
	CHECK_INT(cgroup_own_path(v1_cgroup, "cpu", out, sizeof(out)), 0);
	CHECK_STR(out, "/system.slice/squashd.service");
	CHECK_INT(cgroup_own_path(v1_cgroup, NULL, out, sizeof(out)), -1);
	CHECK_INT(cgroup_own_path(v2_cgroup, "pids", out, sizeof(out)), -1);
	/* "name=systemd" is not "systemd"; a v1 id 0 line with controllers is not v2 */
	CHECK_INT(cgroup_own_path(v1_cgroup, "systemd", out, sizeof(out)), -1);
	CHECK_INT(cgroup_own_path("0:pids:/x\n", NULL, out, sizeof(out)), -1);
	/* a path may hold colons; the last line may lack its newline */
	CHECK_INT(cgroup_own_path("0::/a:b/c.service", NULL, out, sizeof(out)), 0);
	CHECK_STR(out, "/a:b/c.service");
	CHECK_INT(cgroup_own_path("0::/system.slice/squashd.service\n", NULL, out, 8), -1);
	CHECK_INT(cgroup_own_path("no colons\n::\n", NULL, out, sizeof(out)), -1);
}

int main(void)
{
	check_layouts();
	check_v1_mount_points();
	check_own_paths();
	return unit_exit_code();
}

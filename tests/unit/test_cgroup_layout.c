/* The cgroup layout and squashd's own cgroup, read from real
 * /proc/self/mountinfo and /proc/self/cgroup texts of v1, hybrid and v2
 * hosts (daemon/process/cgroup_layout.c). */
#include "config.h"

#include "process/cgroup_layout.h"
#include "unit.h"

/* Debian 12 booted with systemd 252 (the default): unified. */
static const char v2_mountinfo[] =
	"22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
	"25 22 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
	"rw,nsdelegate,memory_recursiveprot\n"
	"28 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro";
static const char v2_cgroup[] = "0::/system.slice/squashd.service\n";

/* This development machine: v1 controllers, systemd's named hierarchy and
 * an empty cgroup2 at /sys/fs/cgroup/unified (a hybrid host). */
static const char hybrid_mountinfo[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	"39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
	"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
static const char hybrid_cgroup[] =
	"9:name=systemd:/\n8:pids:/slurm/node1\n4:memory:/process_api/4f77\n1:cpu:/\n0::/\n";

/* CentOS 7 style v1: controllers mounted in pairs, no cgroup2 anywhere. */
static const char v1_mountinfo[] =
	"25 18 0:21 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755\n"
	"28 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpuacct,cpu\n"
	"30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory\n"
	"33 25 0:29 / /sys/fs/cgroup/pids rw,nosuid shared:15 - cgroup cgroup rw,pids\n"
	"36 25 0:32 / /sys/fs/cgroup/net_cls,net_prio rw shared:18 - cgroup cgroup rw,net_prio,net_cls\n";
static const char v1_cgroup[] =
	"11:pids:/system.slice/squashd.service\n"
	"5:memory:/system.slice/squashd.service\n"
	"4:cpuacct,cpu:/system.slice/squashd.service\n"
	"1:name=systemd:/system.slice/squashd.service\n";

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

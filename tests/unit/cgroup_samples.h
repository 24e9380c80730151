/* Real /proc/self/mountinfo and /proc/self/cgroup texts of v2, hybrid and
 * v1 hosts, for the cgroup unit tests. */
#ifndef SQUASH_CGROUP_SAMPLES_H
#define SQUASH_CGROUP_SAMPLES_H

/* Debian 12 booted with systemd 252 (the default): unified. */
static const char __attribute__((unused)) v2_mountinfo[] =
	"22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
	"25 22 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
	"rw,nsdelegate,memory_recursiveprot\n"
	"28 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro";
static const char __attribute__((unused)) v2_cgroup[] = "0::/system.slice/squashd.service\n";

/* This development machine: v1 controllers, systemd's named hierarchy and
 * an empty cgroup2 at /sys/fs/cgroup/unified (a hybrid host). */
static const char __attribute__((unused)) hybrid_mountinfo[] =
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	"39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
	"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
static const char __attribute__((unused)) hybrid_cgroup[] =
	"9:name=systemd:/\n8:pids:/slurm/node1\n4:memory:/process_api/4f77\n1:cpu:/\n0::/\n";

/* CentOS 7 style v1: controllers mounted in pairs, no cgroup2 anywhere. */
static const char __attribute__((unused)) v1_mountinfo[] =
	"25 18 0:21 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755\n"
	"28 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpuacct,cpu\n"
	"30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory\n"
	"33 25 0:29 / /sys/fs/cgroup/pids rw,nosuid shared:15 - cgroup cgroup rw,pids\n"
	"36 25 0:32 / /sys/fs/cgroup/net_cls,net_prio rw shared:18 - cgroup cgroup rw,net_prio,net_cls\n";
static const char __attribute__((unused)) v1_cgroup[] =
	"11:pids:/system.slice/squashd.service\n"
	"5:memory:/system.slice/squashd.service\n"
	"4:cpuacct,cpu:/system.slice/squashd.service\n"
	"1:name=systemd:/system.slice/squashd.service\n";

#endif

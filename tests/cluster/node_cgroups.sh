# Sourced by cluster.sh: cgroups of their own for a test cluster's slurmd,
# so that Slurm's proctrack/cgroup and task/cgroup run as they do at sites
# while several clusters (and test runs) share this machine.
#
# slurmd goes into a new cgroup squash-test.<DIR's name>.<TAG> under the
# cgroup it was started in, in every cgroup v1 hierarchy the machine has,
# and then into a cgroup namespace and a mount namespace of its own, where
# those hierarchies are mounted again on /sys/fs/cgroup: Slurm sees its cgroup as the root and
# makes its slurm/uid_U/job_J tree below it, which no other cluster can
# see, whose job ids may repeat. Machines with only cgroup v2 (no v1
# hierarchy with a controller) are not handled: site_cgroups_supported says
# so and the caller reports it.
#
# The cgroups made are listed in DIR/run/cgroups; site_cgroups_remove
# kills what is still in them and removes them, deepest first.

# "MOUNTPOINT OPTIONS" of each cgroup v1 hierarchy with a controller
# (named hierarchies such as name=systemd are left out), from mountinfo.
cgroup_v1_hierarchies() {
	awk '{
		for (i = 7; $i != "-"; i++) ;
		if ($(i + 1) != "cgroup") next
		n = split($(i + 3), opt, ",")
		ctl = ""
		for (k = 1; k <= n; k++)
			if (opt[k] !~ /^(rw|ro|relatime|noatime|nosuid|nodev|noexec|clone_children|cpuset_v2_mode|xattr|nsdelegate|memory_recursiveprot|favordynmods|name=.*|release_agent=.*)$/)
				ctl = ctl (ctl == "" ? "" : ",") opt[k]
		if (ctl != "") print $5, ctl
	}' /proc/self/mountinfo
}

site_cgroups_supported() {
	local mp ctl have=""
	while read -r mp ctl; do have="$have,$ctl"; done < <(cgroup_v1_hierarchies)
	case "$have," in *,freezer,*) ;; *) return 1 ;; esac
	case "$have," in *,memory,*) ;; *) return 1 ;; esac
	return 0
}

# This process's cgroup in the hierarchy with controllers $1 (as listed in
# /proc/self/cgroup: "4:memory:/a/b" -> /a/b; "/" -> "").
own_cgroup() {
	awk -F: -v ctl="$1" '$2 == ctl { p = $3; sub(/\/$/, "", p); print p; exit }' /proc/self/cgroup
}

# site_cgroups_enter DIR TAG: moves this shell into the cgroups
# squash-test.<DIR's name>.TAG, one per hierarchy.
site_cgroups_enter() {
	local dir=$1 tag=$2 mp ctl cg parent name
	name="squash-test.$(basename "$dir").$tag"
	while read -r mp ctl; do
		parent=$mp$(own_cgroup "$ctl")
		cg=$parent/$name
		mkdir -p "$cg"
		echo "$cg" >>"$dir/run/cgroups"
		# A new cpuset cgroup has no CPUs and no memory nodes until given some.
		if [ -f "$cg/cpuset.cpus" ]; then
			cat "$parent/cpuset.cpus" >"$cg/cpuset.cpus"
			cat "$parent/cpuset.mems" >"$cg/cpuset.mems"
		fi
		echo $$ >"$cg/cgroup.procs"
	done < <(cgroup_v1_hierarchies)
}

# Inside the new cgroup and mount namespaces: the v1 hierarchies again on
# /sys/fs/cgroup, each rooted at slurmd's cgroup.
site_cgroups_mount() {
	local mp ctl
	local -a list=()
	while read -r mp ctl; do list+=("$ctl"); done < <(cgroup_v1_hierarchies)
	mount -t tmpfs -o mode=0755,nosuid,nodev,noexec squash-test-cgroup /sys/fs/cgroup
	for ctl in "${list[@]}"; do
		mkdir -p "/sys/fs/cgroup/$ctl"
		mount -t cgroup -o "$ctl,nosuid,nodev,noexec" cgroup "/sys/fs/cgroup/$ctl"
	done
}

# site_cgroups_remove DIR: ends what is left in DIR's cgroups (a job's
# task that outlived slurmd) and removes them, their children first.
site_cgroups_remove() {
	local dir=$1 cg i left d
	[ -f "$dir/run/cgroups" ] || return 0
	for cg in $(sort -u "$dir/run/cgroups"); do
		[ -d "$cg" ] || continue
		for i in $(seq 1 50); do
			left=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
			[ -z "$left" ] && break
			# shellcheck disable=SC2086
			kill -KILL $left 2>/dev/null || true
			sleep 0.1
		done
		find "$cg" -depth -type d 2>/dev/null | while read -r d; do
			rmdir "$d" 2>/dev/null || true
		done
		[ ! -d "$cg" ] || log "cannot remove cgroup $cg (still: $left)"
	done
	rm -f "$dir/run/cgroups"
}

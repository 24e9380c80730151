#!/usr/bin/env bash
# Throwaway Slurm cluster on this machine for the tests: munged, slurmctld,
# one or more slurmd, one squashd per node and the SPANK plugin, all living
# in one scratch directory DIR.
#
#   cluster.sh start [--nodes N] DIR      write DIR's config, start everything (and end
#                                         the daemons of instances whose DIR is gone)
#   cluster.sh stop DIR                   stop everything, clean leftovers (idempotent)
#   cluster.sh status DIR                 show what runs, per node
#   cluster.sh squashd-stop [--node NAME] DIR   stop squashd (every node, or NAME)
#   cluster.sh squashd-start [--node NAME] DIR  start squashd again
#   cluster.sh exec DIR NAME [CMD...]     run CMD (default: bash) inside node NAME
#   cluster.sh users                      create the test users and group only
#
# Two layouts:
#
# * Without --nodes: one node, the machine itself (NodeName = `hostname -s`).
#   slurmd and squashd run in the host's namespaces; squashd listens on
#   DIR/squashd.sock and mounts under DIR/squashd/mnt.
#
# * With --nodes N: nodes n1..nN, each a UTS + mount namespace of its own
#   (`unshare --uts --mount --propagation slave`, hostname nK), kept alive by
#   a holder process (`sleep`, shown as "squash-test-node nK DIR/"; pid in
#   DIR/run/node-nK.pid, namespace inodes in DIR/run/node-nK.ns). Inside it:
#     - DIR/node-run is a 16 MB tmpfs of that node only, its /run: one
#       squashd.conf (socket = DIR/node-run/squashd.sock, state_dir =
#       DIR/node-run/squashd) and one plugstack.conf serve every node;
#     - its squashd and `slurmd -N nK` are started with nsenter, so their
#       children (prolog, epilog, slurmstepd, tasks, FUSE servers) are on
#       that node: gethostname() says nK, mounts stay inside the node;
#     - NodeName=nK NodeHostname=nK NodeAddr=127.0.0.1 Port=P+K, and %n in
#       SlurmdSpoolDir/SlurmdPidFile/SlurmdLogFile (Debian's Slurm is built
#       with multiple-slurmd support); one munged and one slurmctld (on the
#       host, port P) serve all nodes;
#     - a new mount namespace starts as a copy of every host mount: node
#       set-up unmounts the copies that are not its own (squashfs, FUSE,
#       loop-backed mounts, other test clusters' directories) so they do not
#       pin other tests' loop devices or FUSE servers.
#   Logs: DIR/log/{slurmd,squashd,node}-nK.log. Look at a node with
#   `cluster.sh exec DIR n2 cat /proc/self/mountinfo`, or from the host
#   through /proc/$(cat DIR/run/node-n2.pid)/{mountinfo,root/...}.
#   Nodes are addressed only as 127.0.0.1 (each slurmd binds its own port,
#   on all addresses as Slurm does); nothing of a node is mounted in the
#   host's namespace, and a node goes away with its last process. Ports are
#   picked under a lock (/tmp/.squash-test-cluster-ports.lock) so clusters
#   started at the same moment do not collide. In the tests, the cluster3
#   fixture of tests/integration/conftest.py is such a cluster.
#
# Environment:
#   SQUASH_BUILD_DIR        out-of-tree build dir (default: <repo>/build)
#   SQUASH_SQUASHD, SQUASH_SQUASHCTL, SQUASH_PLUGIN
#                           squashd, squashctl and spank_squash.so to run
#                           (default: those in SQUASH_BUILD_DIR), e.g. the
#                           files of an unpacked package
#   SQUASH_TEST_PORT_BASE   slurmctld port; slurmd(s) use the next 1 (or N)
#                           (default: the first free run from 16817 on)
#   SQUASH_TEST_CPUS        CPUs each node claims (default 64, so bursts start at once)
#   SQUASH_TEST_RETRY       the plugin's retry= seconds (default 5)
#   SQUASH_TEST_GC_INTERVAL squashd's gc_interval seconds (default 10)
#   SQUASH_TEST_STATE_TMPFS=1  one-node layout: squashd's state_dir (DIR/squashd)
#                           on a tmpfs of its own, as /run/squashd on a real
#                           node (the benchmark's bursts); unmounted at stop
#   SQUASH_SLURM_ONLY=1     start munged + Slurm without squashd and plugin
#   SQUASH_TEST_JOB_NS      a job namespace plugin: tmpfs, tmpfs-entire,
#                           linux, linux-user (see write_job_ns_config);
#                           DIR must then lie outside
#                           /tmp, which each job gets a private copy of
#   SQUASH_TEST_SITE=1      Slurm as sites configure it: proctrack/cgroup,
#                           task/cgroup,task/affinity, PrologFlags with
#                           Contain (RunInJob from 24.05 on, unless
#                           SQUASH_TEST_RUN_IN_JOB=0), cgroups of the
#                           cluster's own (see write_site_config); one
#                           node only
#   SQUASH_TEST_AUTH=slurm  AuthType=auth/slurm and no munged (23.11 on; see
#                           write_auth_config); one node only
#
# Every process is started with SQUASH_TEST_CLUSTER=DIR in its environment,
# so stop finds this instance's processes (and their children such as
# slurmstepd) by that marker, by DIR in their command lines, and on
# multi-node clusters by living in one of its nodes' UTS namespaces (which
# also catches job tasks and FUSE servers): never by name alone, so other
# clusters on the same machine are left alone. Must run as root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self=$here/$(basename "${BASH_SOURCE[0]}")
repo=$(cd "$here/../.." && pwd)
build=${SQUASH_BUILD_DIR:-$repo/build}
squashd_bin=${SQUASH_SQUASHD:-$build/daemon/squashd}
squashctl_bin=${SQUASH_SQUASHCTL:-$build/daemon/squashctl}
plugin_so=${SQUASH_PLUGIN:-$build/spank/.libs/spank_squash.so}
port_base=${SQUASH_TEST_PORT_BASE:-}

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

# shellcheck source=tests/cluster/node_cgroups.sh
. "$here/node_cgroups.sh"

[ "$(id -u)" = 0 ] || die "must run as root"

# ---------------------------------------------------------------- users
ensure_users() {
	getent group sqshare >/dev/null || groupadd sqshare
	local u
	for u in squser1 squser2; do
		id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"
	done
	# sqshare has squser1 as its only member.
	gpasswd -M squser1 sqshare >/dev/null
}

# ---------------------------------------------------------------- helpers
# Node names of a multi-node instance, one per line; nothing for the
# single-node layout (the host itself).
node_names() {
	local dir=$1
	[ -f "$dir/nodes" ] && cat "$dir/nodes"
	return 0
}

# Pid of node $2's namespace holder, if it runs.
holder_pid() {
	local dir=$1 node=$2 pid
	pid=$(cat "$dir/run/node-$node.pid" 2>/dev/null) || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	echo "$pid"
}

# Runs a command inside node $2 (directly on the host for the one-node
# layout, where the node is the host).
in_node() {
	local dir=$1 node=$2 holder
	shift 2
	if [ ! -s "$dir/nodes" ]; then
		"$@"
		return
	fi
	holder=$(holder_pid "$dir" "$node") || die "node $node of $dir is not running"
	nsenter -t "$holder" -m -u -- "$@"
}

# UTS namespace inodes of this instance's nodes (recorded at start, kept
# until stop has seen them empty).
node_uts_inodes() {
	local f
	for f in "$1"/run/node-*.ns; do
		[ -f "$f" ] && cut -d' ' -f1 "$f"
	done
	return 0
}

# PIDs in the UTS namespace(s) with the given inodes.
pids_in_uts() {
	[ $# -gt 0 ] || return 0
	# stat fails for processes that exited meanwhile: not an error here.
	{ stat -L -c '%n %i' /proc/[0-9]*/ns/uts 2>/dev/null || true; } |
		awk -v want=" $* " 'index(want, " " $2 " ") { split($1, a, "/"); print a[3] }'
}

# PIDs of processes belonging to instance $dir: the marker in their
# environment, $dir/ in their command line, or living on one of its nodes.
# Never this script itself (a cluster.sh's comm is its name).
instance_pids() {
	local dir=$1 pid
	{
		grep -lzxF "SQUASH_TEST_CLUSTER=$dir" /proc/[0-9]*/environ 2>/dev/null || true
		# The pattern comes from a file so that grep does not find itself.
		grep -lzF -f <(printf '%s/\n' "$dir") /proc/[0-9]*/cmdline 2>/dev/null || true
		# shellcheck disable=SC2046
		pids_in_uts $(node_uts_inodes "$dir")
	} | sed 's#^/proc/\([0-9]*\)/.*#\1#' | sort -un | while read -r pid; do
		[ "$pid" = $$ ] && continue
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = cluster.sh ] && continue
		if [ -d "/proc/$pid" ]; then echo "$pid"; fi
	done
}

# Processes of instances whose directory is gone (removed by hand after a
# killed test run): `stop DIR` can no longer find their pid files, so every
# start ends them. Only this script's daemons carry the marker. "Gone" is
# judged where the process lives: through /proc/PID/root, in its own mount
# namespace and root, so that a cluster whose directory this namespace
# cannot see (a private /tmp, a test root of tests/matrix) is left alone;
# a process whose root cannot be looked at is left alone too.
sweep_orphans() {
	local f pid d
	for f in $(grep -lz '^SQUASH_TEST_CLUSTER=' /proc/[0-9]*/environ 2>/dev/null); do
		d=$(tr '\0' '\n' <"$f" 2>/dev/null | sed -n 's/^SQUASH_TEST_CLUSTER=//p' | head -n 1)
		pid=${f#/proc/}
		pid=${pid%%/*}
		[ -n "$d" ] && [ -d "/proc/$pid/root/" ] && [ ! -d "/proc/$pid/root$d" ] || continue
		# (checked again: the process may have ended, taking its root along)
		[ -d "/proc/$pid/root/" ] || continue
		[ "$pid" = $$ ] && continue
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = cluster.sh ] && continue
		log "ending pid $pid of an instance whose directory $d is gone"
		kill -KILL "$pid" 2>/dev/null || true
	done
}

# A zombie counts as gone: PID 1 here may be slow to reap orphans.
pid_alive() {
	local st
	[ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null || return 1
	st=$(cut -d')' -f2 "/proc/$1/stat" 2>/dev/null) || return 1
	[ "${st:1:1}" != Z ]
}

# Kills the processes named in the given pid files (those still running),
# all at once, and waits for them: TERM, then KILL after 5 s.
kill_pidfiles() {
	local f pid pids="" alive i
	for f in "$@"; do
		[ -f "$f" ] || continue
		pid=$(cat "$f" 2>/dev/null || true)
		pid_alive "$pid" && pids="$pids $pid"
		rm -f "$f"
	done
	[ -n "$pids" ] || return 0
	kill -TERM $pids 2>/dev/null || true
	for i in $(seq 1 50); do
		alive=""
		for pid in $pids; do pid_alive "$pid" && alive="$alive $pid"; done
		[ -n "$alive" ] || return 0
		sleep 0.1
	done
	kill -KILL $alive 2>/dev/null || true
}

tails() {
	local dir=$1 f
	for f in "$dir"/log/*.log; do
		[ -f "$f" ] || continue
		echo "===== tail $f" >&2
		tail -n 25 "$f" >&2 || true
	done
}

wait_for() { # timeout-seconds description command...
	local t=$1 what=$2 i
	shift 2
	for i in $(seq 1 $((t * 10))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# Mounts of a namespace ($2: a mountinfo file), one per line as
# "DEPTH<TAB>FSTYPE<TAB>SOURCE<TAB>MOUNTPOINT", deepest first, with the
# kernel's octal escapes (\040 for a space...) decoded.
mount_table() {
	awk '
	function unesc(s,   out, i) {
		out = ""
		while ((i = index(s, "\\")) > 0) {
			out = out substr(s, 1, i - 1) sprintf("%c", (substr(s, i + 1, 1) * 64) + (substr(s, i + 2, 1) * 8) + substr(s, i + 3, 1))
			s = substr(s, i + 4)
		}
		return out s
	}
	{
		for (i = 7; i <= NF && $i != "-"; i++) ;
		mp = unesc($5)
		print length(mp) "\t" $(i + 1) "\t" unesc($(i + 2)) "\t" mp
	}' "$1" | sort -t "$(printf '\t')" -k1,1rn
}

# Mount points under $dir (deepest first), in this mount namespace.
mounts_under() {
	local dir=$1 _d _t _s mp
	mount_table /proc/self/mountinfo | while IFS=$'\t' read -r _d _t _s mp; do
		case "$mp" in "$dir"/*) echo "$mp" ;; esac
	done
}

# Lazily unmounts everything under $dir in this namespace (no path
# canonicalisation: a dead FUSE server must not hang the stat).
umount_under() {
	local dir=$1 mp i
	for i in 1 2 3; do
		mounts_under "$dir" | while IFS= read -r mp; do
			umount -l -c "$mp" 2>/dev/null || true
		done
		[ -z "$(mounts_under "$dir")" ] && return 0
		sleep 0.2
	done
}

# Detaches loop devices whose image lies under $dir.
detach_loops() {
	local dir=$1 f dev
	for f in /sys/block/loop*/loop/backing_file; do
		[ -f "$f" ] || continue
		case "$(cat "$f" 2>/dev/null)" in
		"$dir"/*)
			dev=/dev/$(basename "$(dirname "$(dirname "$f")")")
			losetup -d "$dev" 2>/dev/null || true ;;
		esac
	done
}

clean_mounts() {
	umount_under "$1"
	detach_loops "$1"
}

# ---------------------------------------------------------------- config
# TCP ports something listens on (hex from /proc/net/tcp*, state 0A).
listening_ports() {
	local hex
	for hex in $(awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null); do
		echo $((16#$hex))
	done
}

# Ports of other test clusters that may not listen yet: those written in
# the last two minutes or whose slurmctld runs.
claimed_ports() {
	local f d
	for f in "${1%/*}"/*/slurm.conf /tmp/*/slurm.conf; do
		d=${f%/slurm.conf}
		[ "$d" != "$1" ] && is_cluster_dir "$d" "$1" || continue
		[ -n "$(find "$f" -mmin -2 2>/dev/null)" ] ||
			pid_alive "$(cat "$d/run/slurmctld.pid" 2>/dev/null)" || continue
		sed -n 's/^\(SlurmctldPort\|SlurmdPort\)=\([0-9]*\).*/\2/p; s/^NodeName=.* Port=\([0-9]*\).*/\1/p' "$f" 2>/dev/null
	done
	return 0
}

# port_base: slurmctld's port; slurmd(s) use the next $2 ports.
pick_ports() {
	local dir=$1 count=$2 p k used free
	[ -n "$port_base" ] && return 0
	used=" $(listening_ports | tr '\n' ' ') $(claimed_ports "$dir" | tr '\n' ' ') "
	for p in $(seq 16817 $((count + 1)) 16990); do
		free=1
		for k in $(seq 0 "$count"); do
			case "$used" in *" $((p + k)) "*) free=0; break ;; esac
		done
		[ $free = 1 ] || continue
		port_base=$p
		return 0
	done
	die "no $((count + 1)) free ports in 16817-16990 (set SQUASH_TEST_PORT_BASE)"
}

# Does this Slurm know CgroupPlugin=disabled (in cgroup.conf)?
slurm_knows_cgroup_disabled() {
	local lib
	lib=$(ldd "$(command -v slurmd)" 2>/dev/null | awk '$1 ~ /^libslurmfull/ { print $3; exit }')
	[ -n "$lib" ] && grep -qaF 'CgroupPlugin=disabled' "$lib"
}

# for_users DIR FILE TEST: FILE, or a copy of it in DIR/bin when the test
# users cannot use it where it is (test -r for the plugin, which sbatch and
# srun load as the user; test -x for squashctl and the reader): a checkout under /root
# (0700) must work as well as one in /home or /srv.
for_users() {
	local dir=$1 file=$2 t=$3
	if [ ! -e "$file" ] || runuser -u squser1 -- test "$t" "$file" 2>/dev/null; then
		echo "$file"
		return 0
	fi
	mkdir -p "$dir/bin"
	chmod 0755 "$dir/bin"
	cp -f "$file" "$dir/bin/"
	chmod 0755 "$dir/bin/$(basename "$file")"
	echo "$dir/bin/$(basename "$file")"
}

# write_config DIR NODES: NODES=0 for the one-node layout on the host.
write_config() {
	local dir=$1 nodes=$2 host cpus so squashctl_user reader_user sock state_dir k names lock
	host=$(hostname -s)
	# Bursts of jobs must start at once (tests of squashd under load):
	# config_overrides lets the node claim more CPUs than it has.
	cpus=${SQUASH_TEST_CPUS:-64}
	mkdir -p "$dir"/{log,run,spool,state,squashd,targets,trusted,work}
	chmod 0755 "$dir" "$dir"/targets "$dir"/trusted
	chmod 0700 "$dir"/squashd "$dir"/state
	chmod 0755 "$dir"/spool
	chmod 0755 "$dir"/log "$dir"/run
	# Test users put their job scripts, images and outputs here.
	chmod 1777 "$dir"/work

	if [ "$nodes" = 0 ]; then
		rm -f "$dir/nodes"
		sock=$dir/squashd.sock
		state_dir=$dir/squashd
	else
		names=""
		for k in $(seq 1 "$nodes"); do names="$names n$k"; done
		printf '%s\n' $names >"$dir/nodes"
		for k in $names; do mkdir -p "$dir/spool/slurmd-$k"; done
		# Each node mounts its own tmpfs here: the same path, a node's own /run.
		mkdir -p "$dir/node-run"
		chmod 0755 "$dir/node-run"
		sock=$dir/node-run/squashd.sock
		state_dir=$dir/node-run/squashd
	fi

	if [ ! -f "$dir/munge.key" ]; then
		( umask 077; dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none )
	fi
	chmod 0400 "$dir/munge.key"

	# Clusters started at the same moment must not pick the same ports:
	# pick and write slurm.conf under a machine-wide lock (see claimed_ports).
	exec {lock}>/tmp/.squash-test-cluster-ports.lock
	flock -w 30 "$lock" || die "cannot lock /tmp/.squash-test-cluster-ports.lock"
	pick_ports "$dir" "$([ "$nodes" = 0 ] && echo 1 || echo "$nodes")"
	so=$(for_users "$dir" "$plugin_so" -r)
	squashctl_user=$(for_users "$dir" "$squashctl_bin" -x)
	# (squashd runs the reader as the job's user)
	reader_user=$(for_users "$dir" "$build/daemon/reader/squash-reader" -x)
	: >"$dir/plugstack.conf"
	if [ "${SQUASH_SLURM_ONLY:-0}" != 1 ]; then
		echo "required $so socket=$sock default_target=/squash allowed_targets=/squash:$dir/targets munge=yes munge_socket=$dir/munge.sock timeout=30 retry=${SQUASH_TEST_RETRY:-5}" >"$dir/plugstack.conf"
	fi
	chmod 0644 "$dir/plugstack.conf"

	{
		cat <<EOC
# Generated by tests/cluster/cluster.sh for a throwaway test cluster.
ClusterName=sqtest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port_base
SlurmdPort=$((port_base + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/slurmd-%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
PrologFlags=Alloc
PlugStackConfig=$dir/plugstack.conf
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SwitchType=switch/none
KillWait=5
MinJobAge=60
InactiveLimit=0
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=20
EOC
		if [ "$nodes" = 0 ]; then
			cat <<EOC
SlurmdPidFile=$dir/run/slurmd.pid
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=256 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOC
		else
			echo "SlurmdPidFile=$dir/run/slurmd-%n.pid"
			echo "SlurmdLogFile=$dir/log/slurmd-%n.log"
			for k in $(seq 1 "$nodes"); do
				echo "NodeName=n$k NodeHostname=n$k NodeAddr=127.0.0.1 Port=$((port_base + k)) CPUs=$cpus RealMemory=256 State=UNKNOWN"
			done
			echo "PartitionName=debug Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
		fi
	} >"$dir/slurm.conf"
	write_job_ns_config "$dir"
	chmod 0644 "$dir/slurm.conf"
	exec {lock}>&-

	# cgroup.conf (read from slurm.conf's directory): slurmd of 24.11 and
	# later will not start without a cgroup hierarchy, even with
	# proctrack/linuxproc and task/none (the test cluster needs none, and a
	# test root or container may have none), unless CgroupPlugin=disabled;
	# releases without that value refuse it. Decided by the feature: the
	# message libslurmfull has for it.
	rm -f "$dir/cgroup.conf"
	if slurm_knows_cgroup_disabled; then
		cat >"$dir/cgroup.conf" <<EOC
# Generated by tests/cluster/cluster.sh for a throwaway test cluster.
CgroupPlugin=disabled
EOC
		chmod 0644 "$dir/cgroup.conf"
	fi

	write_site_config "$dir" "$nodes"

	cat >"$dir/squashd.conf" <<EOC
# Generated by tests/cluster/cluster.sh for a throwaway test cluster.
socket = $sock
state_dir = $state_dir
base_dir = /squash
allowed_targets = /squash:$dir/targets
mount_mode = auto
trusted_prefixes = $dir/trusted
require_munge = yes
munge_socket = $dir/munge.sock
squashfuse = $(command -v squashfuse_ll || echo /usr/bin/squashfuse_ll)
squash_reader = $reader_user
fuse_reader = ${SQUASH_TEST_FUSE_READER:-squash-reader}
request_timeout = 10
# The hang tests stop readers on purpose, for longer than the default 10 s;
# test_a_reader_left_stopped_is_killed.py turns the watch on.
stopped_reader_timeout = 0
slurm_conf = $dir/slurm.conf
gc_interval = ${SQUASH_TEST_GC_INTERVAL:-10}
EOC
	chown root:root "$dir/squashd.conf"
	chmod 0644 "$dir/squashd.conf"

	cat >"$dir/env.sh" <<EOC
# Source me: the environment of the test cluster in $dir.
export SLURM_CONF=$dir/slurm.conf
export SQUASH_TEST_CLUSTER_DIR=$dir
export SQUASH_TEST_NODES="$(node_names "$dir" | tr '\n' ' ' | sed 's/ $//')"
export SQUASH_SOCKET=$sock
export SQUASH_MUNGE_SOCKET=$dir/munge.sock
export SQUASH_BUILD_DIR=$build
export SQUASHCTL="$squashctl_user --socket $sock --munge-socket $dir/munge.sock"
EOC
	if [ "$nodes" != 0 ]; then
		cat >>"$dir/env.sh" <<EOC
# The socket exists inside each node: $self exec $dir n2 \$SQUASHCTL list
EOC
	fi
	chmod 0644 "$dir/env.sh"
	write_auth_config "$dir" "$nodes"
}

# The installed Slurm as one number, major*100+minor (22.05 -> 2205).
slurm_release() {
	local v
	v=$(slurmd -V | awk '{print $2}')
	echo $(( ${v%%.*} * 100 + 10#$(cut -d. -f2 <<<"$v") ))
}

# A job namespace plugin as sites run it (SQUASH_TEST_JOB_NS): every job
# gets a private /tmp in a mount namespace of its own that its tasks join.
#   tmpfs         job_container/tmpfs (namespace/tmpfs from 25.11 on)
#   tmpfs-entire  the same with EntireStepInNS=yes (24.11 on): slurmstepd
#                 itself runs in the job's namespace
#   linux         namespace/linux (25.11 on; namespace.yaml): slurmstepd
#                 runs in the job's namespaces, here a mount namespace only
#   linux-user    the same plus a user namespace (CLONE_NEWUSER)
# All need PrologFlags=Contain. The jobs' namespaces live in DIR/jobns;
# DIR/jobns.kind names the kind for later commands.
write_job_ns_config() {
	local dir=$1 kind=${SQUASH_TEST_JOB_NS:-} rel
	rm -f "$dir/job_container.conf" "$dir/namespace.yaml" "$dir/jobns.kind"
	[ -n "$kind" ] || return 0
	rel=$(slurm_release)
	case $kind in
	tmpfs | tmpfs-entire | linux | linux-user) ;;
	*) die "SQUASH_TEST_JOB_NS=$kind: not one of tmpfs, tmpfs-entire, linux, linux-user" ;;
	esac
	[ "$kind" != tmpfs-entire ] || [ "$rel" -ge 2411 ] ||
		die "SQUASH_TEST_JOB_NS=tmpfs-entire needs Slurm 24.11 or later (EntireStepInNS)"
	[ "${kind%-user}" != linux ] || [ "$rel" -ge 2511 ] ||
		die "SQUASH_TEST_JOB_NS=$kind needs Slurm 25.11 or later (namespace/linux)"
	mkdir -p "$dir/jobns"
	chmod 0700 "$dir/jobns"
	sed -i 's/^PrologFlags=Alloc$/PrologFlags=Alloc,Contain/' "$dir/slurm.conf"
	case $kind in
	linux | linux-user)
		echo "NamespaceType=namespace/linux" >>"$dir/slurm.conf"
		# No BPF tokens: the test clusters use cgroup v1, where devices
		# are constrained without them.
		cat >"$dir/namespace.yaml" <<EOC
# Generated by tests/cluster/cluster.sh (SQUASH_TEST_JOB_NS=$kind).
---
defaults:
  auto_base_path: true
  base_path: "$dir/jobns"
  disable_bpf_token: true
  clone_ns_flags:
    - "CLONE_NEWNS"
EOC
		[ "$kind" != linux-user ] || echo '    - "CLONE_NEWUSER"' >>"$dir/namespace.yaml"
		chmod 0644 "$dir/namespace.yaml"
		;;
	*)
		if [ "$rel" -ge 2511 ]; then
			echo "NamespaceType=namespace/tmpfs" >>"$dir/slurm.conf"
		else
			echo "JobContainerType=job_container/tmpfs" >>"$dir/slurm.conf"
		fi
		{
			echo "# Generated by tests/cluster/cluster.sh (SQUASH_TEST_JOB_NS=$kind)."
			echo "AutoBasePath=true"
			echo "BasePath=$dir/jobns"
			[ "$kind" != tmpfs-entire ] || echo "EntireStepInNS=yes"
		} >"$dir/job_container.conf"
		chmod 0644 "$dir/job_container.conf"
		;;
	esac
	echo "$kind" >"$dir/jobns.kind"
}

# Slurm as sites configure it (SQUASH_TEST_SITE=1): processes tracked and
# tasks confined by cgroups (v1 hierarchies of the cluster's own, see
# node_cgroups.sh), the extern step of PrologFlags=Contain, and from 24.05
# on RunInJob (prolog and epilog run in the extern step, inside the job's
# cgroup). ConstrainCores stays off: the nodes claim more CPUs than the
# machine has (SQUASH_TEST_CPUS), and a cpuset of CPUs that do not exist
# cannot be made. task/affinity binds each task to CPUs that do exist.
write_site_config() {
	local dir=$1 nodes=$2 flags=Alloc,Contain
	rm -f "$dir/site"
	[ "${SQUASH_TEST_SITE:-0}" = 1 ] || return 0
	[ "$nodes" = 0 ] || die "SQUASH_TEST_SITE=1 makes one-node clusters only"
	site_cgroups_supported ||
		die "SQUASH_TEST_SITE=1 needs cgroup v1 hierarchies with the freezer and memory controllers (this machine: $(cgroup_v1_hierarchies | awk '{print $2}' | tr '\n' ' '))"
	[ "$(slurm_release)" -lt 2405 ] || [ "${SQUASH_TEST_RUN_IN_JOB:-1}" = 0 ] ||
		flags=Alloc,Contain,RunInJob
	sed -i -e "s/^PrologFlags=.*/PrologFlags=$flags/" \
		-e 's#^ProctrackType=.*#ProctrackType=proctrack/cgroup#' \
		-e 's#^TaskPlugin=.*#TaskPlugin=task/cgroup,task/affinity#' "$dir/slurm.conf"
	cat >"$dir/cgroup.conf" <<EOC
# Generated by tests/cluster/cluster.sh for a throwaway test cluster (SQUASH_TEST_SITE=1).
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainRAMSpace=yes
ConstrainDevices=yes
ConstrainCores=no
EOC
	chmod 0644 "$dir/cgroup.conf"
	touch "$dir/site"
}

# The command prefix that starts a one-node cluster's slurmd (nothing for
# the minimal configuration): slurmd-launch puts it in a mount namespace
# of its own (slave: the host's mounts reach it, the jobs' namespace
# mounts stay in it) and, on a site-like cluster, in cgroups and a cgroup
# namespace of its own. With a job namespace plugin it runs on one CPU.
#
# Why one CPU: the plugin bind-mounts /proc/PID/ns/mnt of a freshly
# unshared child onto BASE/JOB/.ns, and the kernel refuses (EINVAL, its
# mount-namespace loop check) when the child's namespace id is lower than
# that of the namespace doing the mount. Linux 6.18 hands out namespace
# ids from per-CPU batches (this machine: 3990 on one CPU, 7344 on the
# other), so a child unshared on another CPU than the one that made
# slurmd's namespace gets a lower id and the job fails (`_create_ns: ns
# base mount failed: Invalid argument`) about every other time. slurmd in
# the initial namespace (id 1, as under systemd) never hits it; slurmd in
# any other one (our Debian roots, containers) does. On one CPU the ids
# only grow.
slurmd_launcher() {
	local dir=$1 cpu
	if [ -f "$dir/jobns.kind" ]; then
		cpu=$(awk '/^Cpus_allowed_list:/ { split($2, a, /[-,]/); print a[1] }' /proc/self/status)
		echo "taskset -c ${cpu:-0} $self slurmd-launch $dir"
	elif [ -f "$dir/site" ]; then
		echo "$self slurmd-launch $dir"
	fi
}

# slurmd-launch DIR CMD...: see slurmd_launcher; ends in exec CMD.
slurmd_launch() {
	local dir=$1
	local -a ns=(--mount --propagation slave)
	shift
	if [ -f "$dir/site" ]; then
		site_cgroups_enter "$dir" slurmd
		ns+=(--cgroup)
	fi
	exec unshare "${ns[@]}" -- "$self" slurmd-launch-inside "$dir" "$@"
}

slurmd_launch_inside() {
	local dir=$1
	shift
	[ ! -f "$dir/site" ] || site_cgroups_mount
	exec "$@"
}

# ---------------------------------------------------------------- nodes
# Is directory $1 a test cluster's directory (other than $2)?
is_cluster_dir() {
	local d=$1 mine=$2 first
	[ "$d" != "$mine" ] && [ -f "$d/slurm.conf" ] || return 1
	read -r first <"$d/slurm.conf" 2>/dev/null || return 1
	[ "$first" = "# Generated by tests/cluster/cluster.sh for a throwaway test cluster." ]
}

# Inside a new node namespace: unmounts the copies of host mounts that are
# not this node's own and would pin someone else's loop device or FUSE
# server (or another cluster's files) for as long as this node lives.
# Never the mounts that hold $dir, the build or the system's programs (a
# distribution may ship /usr or snaps as squashfs).
drop_foreign_mounts() {
	local dir=$1 _d fstype src mp foreign d
	mount_table /proc/self/mountinfo | while IFS=$'\t' read -r _d fstype src mp; do
		case "$dir/" in "$mp"/* | "$mp"//*) continue ;; esac
		case "$build/" in "$mp"/* | "$mp"//*) continue ;; esac
		case "$mp" in
		/ | /usr | /usr/* | /bin | /sbin | /lib | /lib/* | /lib32 | /lib64 | /libx32 | \
		/etc | /etc/* | /opt | /opt/* | /snap/* | /nix | /nix/* | /var/lib/snapd/*) continue ;;
		esac
		foreign=0
		case "$fstype" in squashfs | fuse | fuse.*) foreign=1 ;; esac
		case "$src" in /dev/loop*) foreign=1 ;; esac
		if [ $foreign = 0 ]; then
			d=$mp
			while [ -n "$d" ] && [ "$d" != / ]; do
				if is_cluster_dir "$d" "$dir"; then foreign=1; break; fi
				d=${d%/*}
			done
		fi
		[ $foreign = 1 ] || continue
		umount -l -c "$mp" 2>/dev/null || echo "cluster.sh: node: cannot unmount the copy of $mp" >&2
	done
}

# The holder of a node, run by unshare in the node's new namespaces:
# sets the node up, says so, and sleeps until stop kills it.
node_init() {
	local dir=$1 node=$2
	hostname "$node"
	drop_foreign_mounts "$dir"
	mount -t tmpfs -o mode=0755,size=16m,nosuid,nodev "sqnode-$node" "$dir/node-run"
	echo ready >"$dir/run/node-$node.ready"
	exec -a "squash-test-node $node $dir/" sleep infinity
}

# Starts the holders of all nodes at once and waits until they are set up.
start_nodes() {
	local dir=$1 node pid i pending holder
	for node in $(node_names "$dir"); do
		holder_pid "$dir" "$node" >/dev/null && continue
		rm -f "$dir/run/node-$node.ready" "$dir/run/node-$node.ns"
		SQUASH_TEST_CLUSTER=$dir setsid unshare --uts --mount --propagation slave -- \
			"$self" node-init "$dir" "$node" </dev/null >>"$dir/log/node-$node.log" 2>&1 &
		echo $! >"$dir/run/node-$node.pid"
	done
	for i in $(seq 1 500); do
		pending=""
		for node in $(node_names "$dir"); do
			[ -f "$dir/run/node-$node.ready" ] && continue
			pid=$(cat "$dir/run/node-$node.pid")
			pid_alive "$pid" || { tails "$dir"; die "node $node: set-up failed (see $dir/log/node-$node.log)"; }
			pending="$pending $node"
		done
		[ -z "$pending" ] && break
		sleep 0.02
	done
	[ -z "$pending" ] || { tails "$dir"; die "nodes$pending not set up after 10 s"; }
	for node in $(node_names "$dir"); do
		holder=$(holder_pid "$dir" "$node") || die "node $node: holder died"
		[ -f "$dir/run/node-$node.ns" ] ||
			stat -L -c %i "/proc/$holder/ns/uts" "/proc/$holder/ns/mnt" | tr '\n' ' ' |
			sed 's/ $/\n/' >"$dir/run/node-$node.ns"
	done
}

# SQUASH_TEST_AUTH=slurm: a cluster without MUNGE. Slurm's own auth/slurm
# (23.11 on) signs with a shared key (DIR/slurm.key, beside slurm.conf);
# clients get tokens from the "sack" socket slurmd and slurmctld serve at
# fixed paths, /run/slurm/sack.socket and /run/slurmctld/sack.socket. So
# one such cluster at a time per /run: the release matrix's roots have a
# /run of their own. No munged is started: the plugin finds no munged
# socket (munge=auto) and sends unsigned requests, and squashd takes them
# (require_munge = no, the one line docs/admin.md asks of an admin).
SACK_SOCKETS="/run/slurm/sack.socket /run/slurmctld/sack.socket"
write_auth_config() {
	local dir=$1 nodes=$2 lib f
	rm -f "$dir/auth-slurm"
	[ "${SQUASH_TEST_AUTH:-munge}" != munge ] || return 0
	[ "$SQUASH_TEST_AUTH" = slurm ] || die "SQUASH_TEST_AUTH is munge or slurm, not '$SQUASH_TEST_AUTH'"
	[ "$nodes" = 0 ] || die "SQUASH_TEST_AUTH=slurm makes one-node clusters only"
	lib=$(ldd "$(command -v slurmd)" 2>/dev/null | awk '$1 ~ /^libslurmfull/ { print $3; exit }')
	[ -n "$lib" ] && [ -e "${lib%/*}/auth_slurm.so" ] ||
		die "SQUASH_TEST_AUTH=slurm: this Slurm ($(slurmd -V)) has no auth/slurm (23.11 on)"
	for f in $SACK_SOCKETS; do
		[ ! -e "$f" ] ||
			die "SQUASH_TEST_AUTH=slurm: $f exists: another Slurm on this machine uses auth/slurm, and its sack socket paths are fixed (run the tests in a root: tests/matrix)"
	done
	( umask 077; dd if=/dev/urandom of="$dir/slurm.key" bs=1024 count=1 status=none )
	sed -i -e 's#^AuthType=.*#AuthType=auth/slurm#' -e 's#^CredType=.*#CredType=cred/slurm#' \
		-e '/^AuthInfo=/d' "$dir/slurm.conf"
	sed -i -e 's/ munge=yes / munge=auto /' "$dir/plugstack.conf"
	sed -i -e 's/^require_munge = .*/require_munge = no/' "$dir/squashd.conf"
	touch "$dir/auth-slurm"
}

# The sack sockets an auth/slurm cluster's daemons leave behind (checked
# free at its start, so they are its own).
remove_sack_sockets() {
	local dir=$1 f
	[ -f "$dir/auth-slurm" ] || return 0
	for f in $SACK_SOCKETS; do
		rm -f "$f"
		rmdir "${f%/*}" 2>/dev/null || true
	done
}

# ---------------------------------------------------------------- start
start_munged() {
	local dir=$1
	if [ -f "$dir/run/munged.pid" ] && pid_alive "$(cat "$dir/run/munged.pid")"; then
		return 0
	fi
	rm -f "$dir/munge.sock" "$dir/munge.sock.lock"
	SQUASH_TEST_CLUSTER=$dir munged --force \
		--key-file="$dir/munge.key" --socket="$dir/munge.sock" \
		--pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
		--seed-file="$dir/run/munged.seed" ||
		{ tails "$dir"; die "munged failed to start"; }
	wait_for 10 munge test -S "$dir/munge.sock" ||
		{ tails "$dir"; die "munged socket $dir/munge.sock did not appear"; }
	# Users must reach the socket.
	chmod 0777 "$dir/munge.sock" 2>/dev/null || true
	munge -n -S "$dir/munge.sock" | unmunge -S "$dir/munge.sock" >/dev/null ||
		{ tails "$dir"; die "munge round trip failed"; }
}

# Where node $2's squashd keeps its pid, log and socket (the socket as seen
# from the host: through the holder's root for a namespaced node).
squashd_pidfile() { [ -n "$2" ] && echo "$1/run/squashd-$2.pid" || echo "$1/run/squashd.pid"; }
squashd_logfile() { [ -n "$2" ] && echo "$1/log/squashd-$2.log" || echo "$1/log/squashd.log"; }
squashd_socket() {
	local dir=$1 node=$2 holder
	if [ -z "$node" ]; then
		echo "$dir/squashd.sock"
	else
		holder=$(holder_pid "$dir" "$node") || return 1
		echo "/proc/$holder/root$dir/node-run/squashd.sock"
	fi
}

# Starts squashd on node $2 ("" for the one-node layout); does not wait.
launch_squashd() {
	local dir=$1 node=$2 squashd=$squashd_bin pidf holder
	pidf=$(squashd_pidfile "$dir" "$node")
	[ -x "$squashd" ] || die "$squashd not built (build into $build or set SQUASH_BUILD_DIR)"
	if [ -f "$pidf" ] && pid_alive "$(cat "$pidf")"; then
		return 0
	fi
	if [ -z "$node" ]; then
		SQUASH_TEST_CLUSTER=$dir setsid "$squashd" --config "$dir/squashd.conf" --debug \
			</dev/null >>"$(squashd_logfile "$dir" "")" 2>&1 &
	else
		holder=$(holder_pid "$dir" "$node") || die "node $node is not running (no holder)"
		SQUASH_TEST_CLUSTER=$dir nsenter -t "$holder" -m -u -- \
			setsid "$squashd" --config "$dir/squashd.conf" --debug \
			</dev/null >>"$(squashd_logfile "$dir" "$node")" 2>&1 &
	fi
	echo $! >"$pidf"
}

wait_squashd() {
	local dir=$1 node=$2 pid sock i
	pid=$(cat "$(squashd_pidfile "$dir" "$node")")
	sock=$(squashd_socket "$dir" "$node") || die "node $node is not running (no holder)"
	for i in $(seq 1 200); do
		[ -S "$sock" ] && pid_alive "$pid" && return 0
		pid_alive "$pid" || break
		sleep 0.05
	done
	tails "$dir"
	die "squashd${node:+ on node $node} did not come up (socket $sock)"
}

# start_squashd DIR [NODE]: NODE empty means every node.
start_squashd() {
	local dir=$1 node=${2:-} n list
	if [ ! -s "$dir/nodes" ]; then
		[ -z "$node" ] || die "$dir is a one-node cluster on the host: no node $node"
		launch_squashd "$dir" ""
		wait_squashd "$dir" ""
		return 0
	fi
	list=${node:-$(node_names "$dir")}
	for n in $list; do
		grep -qxF "$n" "$dir/nodes" || die "no node $n in $dir"
		launch_squashd "$dir" "$n"
	done
	for n in $list; do wait_squashd "$dir" "$n"; done
}

# Are all nodes idle? ($2: how many there are)
nodes_idle() {
	local dir=$1 count=$2 n
	n=$(SLURM_CONF=$dir/slurm.conf sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)
	[ "$n" = "$count" ]
}

start_slurm() {
	local dir=$1 i names count ctld pids="" node pid holder
	names=$(node_names "$dir")
	if ! { [ -f "$dir/run/slurmctld.pid" ] && pid_alive "$(cat "$dir/run/slurmctld.pid")"; }; then
		SQUASH_TEST_CLUSTER=$dir SLURM_CONF=$dir/slurm.conf setsid slurmctld -D -i -f "$dir/slurm.conf" \
			</dev/null >>"$dir/log/slurmctld.out" 2>&1 &
		echo $! >"$dir/run/slurmctld.pid.sh"
	fi
	ctld=$(cat "$dir/run/slurmctld.pid.sh" 2>/dev/null || true)
	if [ -z "$names" ]; then
		count=1
		if ! { [ -f "$dir/run/slurmd.pid" ] && pid_alive "$(cat "$dir/run/slurmd.pid")"; }; then
			SQUASH_TEST_CLUSTER=$dir SLURM_CONF=$dir/slurm.conf setsid $(slurmd_launcher "$dir") \
				slurmd -D -f "$dir/slurm.conf" \
				</dev/null >>"$dir/log/slurmd.out" 2>&1 &
			echo $! >"$dir/run/slurmd.pid.sh"
		fi
		pids=$(cat "$dir/run/slurmd.pid.sh" 2>/dev/null || true)
		names=$(hostname -s)
	else
		count=$(echo "$names" | wc -l)
		for node in $names; do
			if ! { [ -f "$dir/run/slurmd-$node.pid" ] && pid_alive "$(cat "$dir/run/slurmd-$node.pid")"; }; then
				holder=$(holder_pid "$dir" "$node") || die "node $node is not running (no holder)"
				SQUASH_TEST_CLUSTER=$dir SLURM_CONF=$dir/slurm.conf nsenter -t "$holder" -m -u -- \
					setsid slurmd -D -N "$node" -f "$dir/slurm.conf" \
					</dev/null >>"$dir/log/slurmd-$node.out" 2>&1 &
				echo $! >"$dir/run/slurmd-$node.pid.sh"
			fi
			pids="$pids $(cat "$dir/run/slurmd-$node.pid.sh" 2>/dev/null || true)"
		done
	fi
	for i in $(seq 1 1200); do
		nodes_idle "$dir" "$count" && return 0
		pid_alive "$ctld" || { sleep 0.5; break; }
		for pid in $pids; do pid_alive "$pid" || { sleep 0.5; break 2; }; done
		# Nodes may come up down/unknown after a restart: resume them.
		if [ $((i % 40)) = 0 ]; then
			SLURM_CONF=$dir/slurm.conf scontrol update nodename="$(echo $names | tr ' ' ,)" state=resume >/dev/null 2>&1 || true
		fi
		sleep 0.05
	done
	SLURM_CONF=$dir/slurm.conf sinfo -N -l >&2 2>&1 || true
	tails "$dir"
	for f in "$dir"/log/*.out; do echo "===== $f" >&2; tail -n 15 "$f" >&2; done
	die "nodes did not become idle (slurmctld/slurmd exited or 60 s passed)"
}

cmd_start() {
	local dir=$1 nodes=$2
	sweep_orphans
	ensure_users
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	write_config "$dir" "$nodes"
	[ -f "$dir/auth-slurm" ] || start_munged "$dir"
	[ "$nodes" = 0 ] || start_nodes "$dir"
	if [ "$nodes" = 0 ] && [ "${SQUASH_TEST_STATE_TMPFS:-0}" = 1 ] && ! mountpoint -q "$dir/squashd"; then
		mount -t tmpfs -o mode=0700,size=16m,nosuid,nodev "sqstate" "$dir/squashd"
	fi
	if [ "${SQUASH_SLURM_ONLY:-0}" != 1 ]; then
		[ -f "$plugin_so" ] ||
			die "$plugin_so not built"
		start_squashd "$dir"
	fi
	start_slurm "$dir"
	if [ "$nodes" = 0 ]; then
		log "cluster up in $dir (source $dir/env.sh)"
	else
		log "cluster of $nodes nodes up in $dir (source $dir/env.sh; cluster.sh exec $dir n1)"
	fi
}

# ---------------------------------------------------------------- stop
# squashd_stop DIR [NODE]: NODE empty means every node.
squashd_stop() {
	local dir=$1 node=${2:-} n list p uts sock
	list=$node
	[ -n "$list" ] || list=$(node_names "$dir")
	if [ -z "$list" ]; then
		kill_pidfiles "$dir/run/squashd.pid"
		for p in $(instance_pids "$dir"); do
			case "$(cat "/proc/$p/comm" 2>/dev/null)" in
			squashd) kill -TERM "$p" 2>/dev/null || true ;;
			esac
		done
		rm -f "$dir/squashd.sock"
		return 0
	fi
	for n in $list; do
		grep -qxF "$n" "$dir/nodes" || die "no node $n in $dir"
		sock=$(squashd_socket "$dir" "$n" || true)
		kill_pidfiles "$dir/run/squashd-$n.pid"
		# Any other squashd on that node (and only on that node).
		uts=$(cut -d' ' -f1 "$dir/run/node-$n.ns" 2>/dev/null || true)
		for p in $(pids_in_uts $uts); do
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" = squashd ] && kill -TERM "$p" 2>/dev/null || true
		done
		[ -n "$sock" ] && rm -f "$sock"
	done
	return 0
}

cmd_stop() {
	local dir=$1 p i left node holder holders="" keep
	[ -d "$dir" ] || { log "$dir does not exist: nothing to stop"; return 0; }
	dir=$(cd "$dir" && pwd)
	# Cancel leftover jobs while slurmctld still runs, so epilogs release mounts.
	if [ -f "$dir/slurm.conf" ] && [ -f "$dir/run/slurmctld.pid" ] && pid_alive "$(cat "$dir/run/slurmctld.pid")"; then
		if [ -n "$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null)" ]; then
			SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --quiet $(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null) 2>/dev/null || true
			for i in $(seq 1 150); do
				[ -z "$(SLURM_CONF=$dir/slurm.conf squeue -h -o %i 2>/dev/null)" ] && break
				sleep 0.1
			done
		fi
	fi
	# No job is left, so squashd can go down together with Slurm.
	kill_pidfiles "$dir"/run/slurmd*.pid* "$dir"/run/slurmctld.pid* "$dir"/run/squashd*.pid
	squashd_stop "$dir"
	# Unmount what the nodes still hold; their FUSE servers then exit.
	for node in $(node_names "$dir"); do
		holder=$(holder_pid "$dir" "$node") || continue
		holders="$holders $holder"
		nsenter -t "$holder" -m -- "$self" node-clean "$dir" || true
	done
	# slurmstepd, job processes and FUSE servers of this instance.
	keep=" $holders "
	for i in $(seq 1 50); do
		left=$(instance_pids "$dir" | while read -r p; do
			case "$keep" in *" $p "*) continue ;; esac
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" = munged ] || echo "$p"; done)
		[ -z "$left" ] && break
		[ "$i" = 20 ] && kill -TERM $left 2>/dev/null || true
		[ "$i" = 40 ] && kill -KILL $left 2>/dev/null || true
		sleep 0.1
	done
	site_cgroups_remove "$dir"
	# A node goes away with its last process, and its mounts with it.
	kill_pidfiles "$dir"/run/node-*.pid
	clean_mounts "$dir"
	# FUSE servers of this instance exit once their mount is gone; kill the
	# rest (marker, DIR in argv, on a node, or serving an image under DIR).
	for i in $(seq 1 30); do
		left=""
		for p in $(pgrep -x 'squashfuse_ll|squash-reader' 2>/dev/null || true); do
			if instance_pids "$dir" | grep -qx "$p" ||
			   ls -l "/proc/$p/fd" 2>/dev/null | grep -qF -- "-> $dir/"; then
				left="$left $p"
			fi
		done
		[ -z "$left" ] && break
		[ "$i" -ge 10 ] && kill -KILL $left 2>/dev/null || kill -TERM $left 2>/dev/null || true
		sleep 0.1
	done
	kill_pidfiles "$dir/run/munged.pid"
	for p in $(instance_pids "$dir"); do kill -KILL "$p" 2>/dev/null || true; done
	# Loop devices of a node's kernel mounts clear once the node is gone.
	for i in $(seq 1 20); do
		# shellcheck disable=SC2046
		[ -z "$(pids_in_uts $(node_uts_inodes "$dir"))" ] && break
		sleep 0.1
	done
	clean_mounts "$dir"
	# shellcheck disable=SC2046
	if [ -z "$(pids_in_uts $(node_uts_inodes "$dir"))" ]; then
		# Namespace inodes get reused: forget them once they are empty.
		rm -f "$dir"/run/node-*.ns "$dir"/run/node-*.ready
	else
		log "processes still on the nodes of $dir:" $(pids_in_uts $(node_uts_inodes "$dir"))
	fi
	rm -f "$dir/munge.sock" "$dir/munge.sock.lock" "$dir/squashd.sock"
	remove_sack_sockets "$dir"
	log "cluster in $dir stopped"
}

cmd_status() {
	local dir=$1 f node holder
	dir=$(cd "$dir" && pwd)
	for f in munged slurmctld; do
		if [ -f "$dir/run/$f.pid" ] && pid_alive "$(cat "$dir/run/$f.pid")"; then
			echo "$f: running (pid $(cat "$dir/run/$f.pid"))"
		else
			echo "$f: stopped"
		fi
	done
	if [ ! -s "$dir/nodes" ]; then
		for f in squashd slurmd; do
			if [ -f "$dir/run/$f.pid" ] && pid_alive "$(cat "$dir/run/$f.pid")"; then
				echo "$f: running (pid $(cat "$dir/run/$f.pid"))"
			else
				echo "$f: stopped"
			fi
		done
	fi
	for node in $(node_names "$dir"); do
		if ! holder=$(holder_pid "$dir" "$node"); then
			echo "node $node: down"
			continue
		fi
		echo "node $node: up (holder pid $holder)"
		for f in squashd slurmd; do
			if [ -f "$dir/run/$f-$node.pid" ] && pid_alive "$(cat "$dir/run/$f-$node.pid")"; then
				echo "  $f: running (pid $(cat "$dir/run/$f-$node.pid"))"
			else
				echo "  $f: stopped"
			fi
		done
		echo "  mounts under $dir on $node:"
		awk -v d="$dir/" '{ if (index($5, d) == 1) print "    " $5 " " $(NF - 2) }' "/proc/$holder/mountinfo"
	done
	SLURM_CONF=$dir/slurm.conf sinfo -N 2>/dev/null || true
	SLURM_CONF=$dir/slurm.conf squeue 2>/dev/null || true
	echo "mounts under $dir on the host:"; mounts_under "$dir"
}

cmd_exec() {
	local dir=$1 node=$2
	shift 2
	dir=$(cd "$dir" && pwd)
	grep -qxF "$node" "$dir/nodes" 2>/dev/null || die "no node $node in $dir"
	[ $# -gt 0 ] || set -- bash
	in_node "$dir" "$node" "$@"
}

usage() {
	sed -n '/^#   cluster.sh /s/^#   /usage: /p' "$self" >&2
	exit 2
}

# cluster.sh CMD [--nodes N] [--node NAME] DIR
cmd=${1:-}
[ $# -gt 0 ] && shift
nodes=0 node=""
while [ $# -gt 0 ]; do
	case "$1" in
	--nodes) [ $# -ge 2 ] || usage; nodes=$2; shift 2 ;;
	--nodes=*) nodes=${1#*=}; shift ;;
	--node) [ $# -ge 2 ] || usage; node=$2; shift 2 ;;
	--node=*) node=${1#*=}; shift ;;
	*) break ;;
	esac
done
case "$nodes" in ''|*[!0-9]*) die "--nodes wants a number, not '$nodes'" ;; esac
[ "$nodes" -le 16 ] || die "--nodes $nodes: at most 16"

case "$cmd" in
start) [ $# = 1 ] || usage; cmd_start "$1" "$nodes" ;;
stop) [ $# = 1 ] || usage; cmd_stop "$1" ;;
status) [ $# = 1 ] || usage; cmd_status "$1" ;;
squashd-stop) [ $# = 1 ] || usage; squashd_stop "$(cd "$1" && pwd)" "$node" ;;
squashd-start) [ $# = 1 ] || usage; start_squashd "$(cd "$1" && pwd)" "$node" ;;
exec) [ $# -ge 2 ] || usage; cmd_exec "$@" ;;
users) ensure_users ;;
# Internal: the first process of a new node, and a node's unmount at stop.
node-init) [ $# = 2 ] || usage; node_init "$1" "$2" ;;
node-clean) [ $# = 1 ] || usage; umount_under "$1" ;;
# Internal: how a one-node cluster's slurmd starts (slurmd_launcher).
slurmd-launch) [ $# -ge 2 ] || usage; slurmd_launch "$@" ;;
slurmd-launch-inside) [ $# -ge 2 ] || usage; slurmd_launch_inside "$@" ;;
*) usage ;;
esac

#!/usr/bin/env bash
# Throwaway single-node Slurm cluster with munged, squashd and the SPANK
# plugin, all living in one scratch directory.
#
#   cluster.sh start DIR           create DIR's config and start everything
#   cluster.sh stop DIR            stop everything and clean leftovers (idempotent)
#   cluster.sh status DIR          show what runs
#   cluster.sh squashd-stop DIR    stop only squashd (tests of a missing daemon)
#   cluster.sh squashd-start DIR   start squashd again
#   cluster.sh users               create the test users and group only
#
# Environment:
#   SQUASH_BUILD_DIR        out-of-tree build dir (default: <repo>/build)
#   SQUASH_SQUASHD, SQUASH_SQUASHCTL, SQUASH_PLUGIN
#                           squashd, squashctl and spank_squash.so to run
#                           (default: those in SQUASH_BUILD_DIR), e.g. the
#                           files of an unpacked package
#   SQUASH_TEST_PORT_BASE   slurmctld port; slurmd uses the next (default: the
#                           first free pair from 16817 on)
#   SQUASH_SLURM_ONLY=1     start munged + Slurm without squashd and plugin
#
# Every daemon is started with SQUASH_TEST_CLUSTER=DIR in its environment, so
# stop finds this instance's processes (and their children such as
# slurmstepd) by that marker and by DIR in their command lines, never by name
# alone. Must run as root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${SQUASH_BUILD_DIR:-$repo/build}
squashd_bin=${SQUASH_SQUASHD:-$build/daemon/squashd}
squashctl_bin=${SQUASH_SQUASHCTL:-$build/daemon/squashctl}
plugin_so=${SQUASH_PLUGIN:-$build/spank/.libs/spank_squash.so}
port_base=${SQUASH_TEST_PORT_BASE:-}

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

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
# PIDs of processes belonging to instance $dir: the marker in their
# environment or $dir in their command line.
instance_pids() {
	local dir=$1 p pid
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$pid" = $$ ] && continue
		[ "$pid" = "$BASHPID" ] && continue
		if grep -qzxF "SQUASH_TEST_CLUSTER=$dir" "$p/environ" 2>/dev/null ||
		   grep -qzF "$dir/" "$p/cmdline" 2>/dev/null; then
			echo "$pid"
		fi
	done
}

pid_alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

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

# ---------------------------------------------------------------- config
# TCP ports something listens on (hex from /proc/net/tcp*, state 0A).
listening_ports() {
	local hex
	for hex in $(awk 'NR > 1 && $4 == "0A" { n = split($2, a, ":"); print a[n] }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null); do
		echo $((16#$hex))
	done
}

pick_ports() {
	local p used
	[ -n "$port_base" ] && return 0
	used=" $(listening_ports | tr '\n' ' ') "
	for p in $(seq 16817 2 16899); do
		case "$used" in
		*" $p "* | *" $((p + 1)) "*) continue ;;
		esac
		port_base=$p
		return 0
	done
	die "no free port pair in 16817-16900 (set SQUASH_TEST_PORT_BASE)"
}

write_config() {
	local dir=$1 host cpus mem so
	host=$(hostname -s)
	cpus=$(nproc)
	# Two jobs must run at once; config_overrides lets a 1-CPU VM claim two.
	[ "$cpus" -ge 2 ] || cpus=2
	mkdir -p "$dir"/{log,run,spool,state,squashd,targets,trusted,work}
	chmod 0755 "$dir" "$dir"/targets "$dir"/trusted
	chmod 0700 "$dir"/squashd "$dir"/state
	chmod 0755 "$dir"/spool
	chmod 0755 "$dir"/log "$dir"/run
	# Test users put their job scripts, images and outputs here.
	chmod 1777 "$dir"/work

	if [ ! -f "$dir/munge.key" ]; then
		( umask 077; dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none )
	fi
	chmod 0400 "$dir/munge.key"

	pick_ports
	so=$plugin_so
	: >"$dir/plugstack.conf"
	if [ "${SQUASH_SLURM_ONLY:-0}" != 1 ]; then
		echo "required $so socket=$dir/squashd.sock default_target=/squash allowed_targets=/squash:$dir/targets munge=yes munge_socket=$dir/munge.sock timeout=30" >"$dir/plugstack.conf"
	fi
	chmod 0644 "$dir/plugstack.conf"

	cat >"$dir/slurm.conf" <<EOF
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
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=256 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
	chmod 0644 "$dir/slurm.conf"

	cat >"$dir/squashd.conf" <<EOF
# Generated by tests/cluster/cluster.sh for a throwaway test cluster.
socket = $dir/squashd.sock
state_dir = $dir/squashd
base_dir = /squash
allowed_targets = /squash:$dir/targets
mount_mode = auto
trusted_prefixes = $dir/trusted
require_munge = yes
munge_socket = $dir/munge.sock
squashfuse = $(command -v squashfuse_ll || echo /usr/bin/squashfuse_ll)
request_timeout = 10
EOF
	chown root:root "$dir/squashd.conf"
	chmod 0644 "$dir/squashd.conf"

	cat >"$dir/env.sh" <<EOF
# Source me: the environment of the test cluster in $dir.
export SLURM_CONF=$dir/slurm.conf
export SQUASH_TEST_CLUSTER_DIR=$dir
export SQUASH_SOCKET=$dir/squashd.sock
export SQUASH_MUNGE_SOCKET=$dir/munge.sock
export SQUASH_BUILD_DIR=$build
export SQUASHCTL="$squashctl_bin --socket $dir/squashd.sock --munge-socket $dir/munge.sock"
EOF
	chmod 0644 "$dir/env.sh"
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

start_squashd() {
	local dir=$1 squashd=$squashd_bin pid
	[ -x "$squashd" ] || die "$squashd not built (build into $build or set SQUASH_BUILD_DIR)"
	if [ -f "$dir/run/squashd.pid" ] && pid_alive "$(cat "$dir/run/squashd.pid")"; then
		return 0
	fi
	SQUASH_TEST_CLUSTER=$dir setsid "$squashd" --config "$dir/squashd.conf" --debug \
		</dev/null >>"$dir/log/squashd.log" 2>&1 &
	pid=$!
	echo "$pid" >"$dir/run/squashd.pid"
	local i
	for i in $(seq 1 100); do
		[ -S "$dir/squashd.sock" ] && break
		pid_alive "$pid" || break
		sleep 0.1
	done
	if ! [ -S "$dir/squashd.sock" ] || ! pid_alive "$pid"; then
		tails "$dir"
		die "squashd did not come up (socket $dir/squashd.sock)"
	fi
}

node_idle() {
	local dir=$1 st
	st=$(SLURM_CONF=$dir/slurm.conf sinfo -h -N -o '%T' 2>/dev/null | head -n1)
	[ "$st" = idle ]
}

start_slurm() {
	local dir=$1 i
	if ! { [ -f "$dir/run/slurmctld.pid" ] && pid_alive "$(cat "$dir/run/slurmctld.pid")"; }; then
		SQUASH_TEST_CLUSTER=$dir SLURM_CONF=$dir/slurm.conf setsid slurmctld -D -i -f "$dir/slurm.conf" \
			</dev/null >>"$dir/log/slurmctld.out" 2>&1 &
		echo $! >"$dir/run/slurmctld.pid.sh"
	fi
	local ctld slurmd
	ctld=$(cat "$dir/run/slurmctld.pid.sh" 2>/dev/null || true)
	if ! { [ -f "$dir/run/slurmd.pid" ] && pid_alive "$(cat "$dir/run/slurmd.pid")"; }; then
		SQUASH_TEST_CLUSTER=$dir SLURM_CONF=$dir/slurm.conf setsid slurmd -D -f "$dir/slurm.conf" \
			</dev/null >>"$dir/log/slurmd.out" 2>&1 &
		echo $! >"$dir/run/slurmd.pid.sh"
	fi
	slurmd=$(cat "$dir/run/slurmd.pid.sh" 2>/dev/null || true)
	for i in $(seq 1 600); do
		node_idle "$dir" && return 0
		if ! pid_alive "$ctld" || ! pid_alive "$slurmd"; then
			sleep 0.5; break
		fi
		# The node may come up down/unknown after a restart: resume it.
		if [ $((i % 20)) = 0 ]; then
			SLURM_CONF=$dir/slurm.conf scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
		fi
		sleep 0.1
	done
	SLURM_CONF=$dir/slurm.conf sinfo -N -l >&2 2>&1 || true
	tails "$dir"
	for f in "$dir"/log/*.out; do echo "===== $f" >&2; tail -n 15 "$f" >&2; done
	die "node did not become idle (slurmctld/slurmd exited or 60 s passed)"
}

cmd_start() {
	local dir=$1
	ensure_users
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	write_config "$dir"
	start_munged "$dir"
	if [ "${SQUASH_SLURM_ONLY:-0}" != 1 ]; then
		[ -f "$plugin_so" ] || die "$plugin_so not built"
		start_squashd "$dir"
	fi
	start_slurm "$dir"
	log "cluster up in $dir (source $dir/env.sh)"
}

# ---------------------------------------------------------------- stop
squashd_stop() {
	local dir=$1
	kill_pidfiles "$dir/run/squashd.pid"
	local p
	for p in $(instance_pids "$dir"); do
		case "$(cat "/proc/$p/comm" 2>/dev/null)" in
		squashd) kill -TERM "$p" 2>/dev/null || true ;;
		esac
	done
	rm -f "$dir/squashd.sock"
}

# Mount points under $dir (deepest first), in this mount namespace.
mounts_under() {
	local dir=$1
	awk -v d="$dir/" '{ mp=$5; gsub(/\\040/, " ", mp); if (index(mp, d) == 1) print length(mp) " " mp }' /proc/self/mountinfo |
		sort -rn | cut -d' ' -f2-
}

clean_mounts() {
	local dir=$1 mp dev f i
	for i in 1 2 3; do
		mounts_under "$dir" | while IFS= read -r mp; do
			umount -l "$mp" 2>/dev/null || true
		done
		[ -z "$(mounts_under "$dir")" ] && break
		sleep 0.2
	done
	for f in /sys/block/loop*/loop/backing_file; do
		[ -f "$f" ] || continue
		case "$(cat "$f" 2>/dev/null)" in
		"$dir"/*)
			dev=/dev/$(basename "$(dirname "$(dirname "$f")")")
			losetup -d "$dev" 2>/dev/null || true ;;
		esac
	done
}

cmd_stop() {
	local dir=$1 p i left
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
	kill_pidfiles "$dir"/run/slurmd.pid* "$dir"/run/slurmctld.pid* "$dir/run/squashd.pid"
	squashd_stop "$dir"
	# slurmstepd and job processes of this instance carry the marker.
	for i in $(seq 1 50); do
		left=$(instance_pids "$dir" | while read -r p; do
			[ "$(cat "/proc/$p/comm" 2>/dev/null)" = munged ] || echo "$p"; done)
		[ -z "$left" ] && break
		[ "$i" = 20 ] && kill -TERM $left 2>/dev/null || true
		[ "$i" = 40 ] && kill -KILL $left 2>/dev/null || true
		sleep 0.1
	done
	clean_mounts "$dir"
	# FUSE servers of this instance exit once their mount is gone; kill the
	# rest (marker, DIR in argv, or serving an image under DIR).
	for i in $(seq 1 30); do
		left=""
		for p in $(pgrep -x squashfuse_ll 2>/dev/null || true); do
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
	clean_mounts "$dir"
	rm -f "$dir/munge.sock" "$dir/munge.sock.lock" "$dir/squashd.sock"
	log "cluster in $dir stopped"
}

cmd_status() {
	local dir=$1 f
	dir=$(cd "$dir" && pwd)
	for f in munged squashd slurmctld slurmd; do
		if [ -f "$dir/run/$f.pid" ] && pid_alive "$(cat "$dir/run/$f.pid")"; then
			echo "$f: running (pid $(cat "$dir/run/$f.pid"))"
		else
			echo "$f: stopped"
		fi
	done
	SLURM_CONF=$dir/slurm.conf sinfo -N 2>/dev/null || true
	SLURM_CONF=$dir/slurm.conf squeue 2>/dev/null || true
	echo "mounts under $dir:"; mounts_under "$dir"
}

case "${1:-}" in
start) [ $# = 2 ] || die "usage: $0 start DIR"; cmd_start "$2" ;;
stop) [ $# = 2 ] || die "usage: $0 stop DIR"; cmd_stop "$2" ;;
status) [ $# = 2 ] || die "usage: $0 status DIR"; cmd_status "$2" ;;
squashd-stop) [ $# = 2 ] || die "usage: $0 squashd-stop DIR"; squashd_stop "$(cd "$2" && pwd)" ;;
squashd-start) [ $# = 2 ] || die "usage: $0 squashd-start DIR"; start_squashd "$(cd "$2" && pwd)" ;;
users) ensure_users ;;
*) die "usage: $0 start|stop|status|squashd-stop|squashd-start DIR" ;;
esac

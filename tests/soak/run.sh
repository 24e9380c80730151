#!/usr/bin/env bash
# Soak test of slurm-squash (issue 6, item 9). Not part of the CI run.
#
#   tests/soak/run.sh [--jobs N] [--quick] [--keep] [--report FILE] [--seed S]
#
# Starts its own throwaway cluster (tests/cluster/cluster.sh) in a fresh
# scratch directory, using the build in $SQUASH_BUILD_DIR (default
# <repo>/build; nothing is built here), and drives at least N (default 1000)
# mixed jobs through it with tests/soak/soak.py: completed and failing jobs,
# scancel in prolog, run and epilog, time limits, requeues, arrays of 100,
# 128 jobs at once on one image, 64 at once on distinct images, FUSE (user)
# and kernel (trusted) mounts, while squashd is SIGKILLed and restarted and
# FUSE servers are SIGKILLed at random moments. Ends with a Markdown report
# (printed and written to FILE, default ./soak-report.md).
#
#   --jobs N     at least N jobs (default 1000)
#   --quick      about 150 jobs (development)
#   --keep       keep the scratch directory (logs, job outputs)
#   --report F   where to write the report
#   --seed S     random seed (default: time based; printed in the report)
#
# Environment: SQUASH_BUILD_DIR, SQUASH_SOAK_RETRY (the plugin's retry=
# seconds, default 60, the plugin's own default), SQUASH_SOAK_GC_INTERVAL
# (squashd's gc_interval, default 10).
#
# Everything it started (cluster daemons, jobs, mounts, loop devices, FUSE
# servers of its instance) is stopped on exit, Ctrl-C included. Must run as
# root. Exit status: 0 when the goal was met (0 leftovers, 0 jobs failed by
# the node's own fault), 1 when not, 2 on usage or set-up errors.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export SQUASH_BUILD_DIR=${SQUASH_BUILD_DIR:-$repo/build}
cluster_sh=$repo/tests/cluster/cluster.sh

jobs=1000 keep=0 report=$PWD/soak-report.md seed=""
while [ $# -gt 0 ]; do
	case "$1" in
	--jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
	--jobs=*) jobs=${1#--jobs=}; shift ;;
	--quick) jobs=150; shift ;;
	--keep) keep=1; shift ;;
	--report) report=${2:?--report needs a file}; shift 2 ;;
	--report=*) report=${1#--report=}; shift ;;
	--seed) seed=${2:?--seed needs a value}; shift 2 ;;
	-h | --help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
case "$jobs" in '' | *[!0-9]*) echo "run.sh: --jobs needs a number" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "run.sh: must run as root" >&2; exit 2; }
for f in daemon/squashd daemon/squashctl spank/.libs/spank_squash.so; do
	[ -e "$SQUASH_BUILD_DIR/$f" ] || {
		echo "run.sh: $SQUASH_BUILD_DIR/$f not built (build first, e.g. tests/run.sh --build-only)" >&2
		exit 2
	}
done

dir=$(mktemp -d /tmp/sqsoak.XXXXXX)
chmod 0755 "$dir"
driver_pid=""

cleanup() {
	local rc=$?
	trap - EXIT INT TERM HUP
	if [ -n "$driver_pid" ] && kill -0 "$driver_pid" 2>/dev/null; then
		kill -TERM "$driver_pid" 2>/dev/null || true
		wait "$driver_pid" 2>/dev/null || true
	fi
	echo "run.sh: stopping the soak cluster in $dir" >&2
	"$cluster_sh" stop "$dir" >&2 || true
	if [ "$keep" = 1 ]; then
		echo "run.sh: kept $dir" >&2
	elif awk -v d="$dir/" 'index($5, d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
		echo "run.sh: mounts are still left under $dir; not removing it" >&2
	else
		rm -rf "$dir"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

echo "run.sh: starting the soak cluster in $dir" >&2
SQUASH_TEST_CPUS=${SQUASH_SOAK_CPUS:-200} \
SQUASH_TEST_RETRY=${SQUASH_SOAK_RETRY:-60} \
SQUASH_TEST_GC_INTERVAL=${SQUASH_SOAK_GC_INTERVAL:-10} \
	"$cluster_sh" start "$dir" >&2

# The driver runs in the background so that a signal reaches this shell's
# trap at once (bash defers traps while a foreground child runs).
python3 "$here/soak.py" --dir "$dir" --jobs "$jobs" --report "$report" \
	--cluster-sh "$cluster_sh" --build "$SQUASH_BUILD_DIR" \
	--retry "${SQUASH_SOAK_RETRY:-60}" --gc-interval "${SQUASH_SOAK_GC_INTERVAL:-10}" \
	${seed:+--seed "$seed"} &
driver_pid=$!
set +e
wait "$driver_pid"
rc=$?
set -e
driver_pid=""
exit "$rc"

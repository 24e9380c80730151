#!/usr/bin/env bash
# slurm-squash demo for a fresh Debian 12 machine, as root: installs the
# dependencies, builds, starts a throwaway one-node Slurm cluster with
# squashd and the plugin in a scratch directory, runs one job with a squashfs
# image as the test user squser1, shows its output, and stops everything.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SQUASH_BUILD_DIR=${SQUASH_BUILD_DIR:-$repo/build}

[ "$(id -u)" = 0 ] || { echo "demo.sh: run as root" >&2; exit 1; }

"$repo/tests/run.sh" --build-only

dir=$(mktemp -d /tmp/squash-demo.XXXXXX)
chmod 0755 "$dir"
cleanup() {
	"$repo/tests/cluster/cluster.sh" stop "$dir" || true
	rm -rf "$dir"
}
trap cleanup EXIT

echo
echo "=== starting a throwaway cluster in $dir"
"$repo/tests/cluster/cluster.sh" start "$dir"
# shellcheck source=/dev/null
. "$dir/env.sh"

echo
echo "=== building a sample software image as squser1"
work=$dir/work/demo
mkdir -p "$work/stack/bin" "$work/stack/share"
cat >"$work/stack/bin/hello-stack" <<'SCRIPT'
#!/bin/sh
echo "hello-stack: running from $(dirname "$(readlink -f "$0")") as $(id -un)"
SCRIPT
chmod 0755 "$work/stack/bin/hello-stack"
echo "reference data shipped inside the image" >"$work/stack/share/data.txt"
mksquashfs "$work/stack" "$work/stack.sqfs" -noappend -quiet -no-progress -all-root
chown -R squser1: "$work"
ls -l "$work/stack.sqfs"

cat >"$work/job.sh" <<'JOB'
#!/bin/bash
echo "batch step on $(hostname): SQUASH_MOUNT=$SQUASH_MOUNT SQUASH_IMAGES=$SQUASH_IMAGES"
ls -l "$SQUASH_MOUNT" "$SQUASH_MOUNT/bin"
cat "$SQUASH_MOUNT/share/data.txt"
"$SQUASH_MOUNT/bin/hello-stack"
echo "srun step:"
srun bash -c 'ls "$SQUASH_MOUNT"; cat "$SQUASH_MOUNT/share/data.txt"; "$SQUASH_MOUNT/bin/hello-stack"'
JOB
chmod 0755 "$work/job.sh"
chown squser1: "$work/job.sh"

echo
echo "=== sbatch --squash-image=$work/stack.sqfs --wait job.sh   (as squser1)"
rc=0
(cd "$work" && runuser -u squser1 -- env SLURM_CONF="$SLURM_CONF" \
	sbatch --squash-image="$work/stack.sqfs" --wait -o "$work/job.out" "$work/job.sh") || rc=$?

echo
echo "=== job output ($work/job.out)"
cat "$work/job.out" 2>/dev/null || echo "(no output file)"
echo
if awk '$5 == "/squash/stack" { found = 1 } END { exit !found }' /proc/self/mountinfo; then
	echo "=== unexpected: /squash/stack is visible on the host"
	rc=1
else
	echo "=== the host never saw /squash/stack: only the job's steps did"
fi
[ "$rc" = 0 ] && echo "=== demo finished: ok" || echo "=== demo failed (exit $rc)"
exit "$rc"

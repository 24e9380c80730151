#!/usr/bin/env bash
# slurm-squash demo for a fresh Debian 12 or 13 machine, as root: installs the
# dependencies, builds, starts a throwaway three-node Slurm cluster on this
# machine (each node in its own namespaces, with its own slurmd and squashd;
# see tests/cluster/cluster.sh) in a scratch directory, runs one job with a
# squashfs image on all three nodes as the test user squser1, shows its
# output, and stops everything.
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
echo "=== starting a throwaway three-node cluster in $dir"
"$repo/tests/cluster/cluster.sh" start --nodes 3 "$dir"
# shellcheck source=/dev/null
. "$dir/env.sh"

echo
echo "=== building a sample software image as squser1"
work=$dir/work/demo
mkdir -p "$work/stack/bin" "$work/stack/share"
cat >"$work/stack/bin/hello-stack" <<'SCRIPT'
#!/bin/sh
echo "hello-stack on $(hostname): running from $(dirname "$(readlink -f "$0")") as $(id -un)"
SCRIPT
chmod 0755 "$work/stack/bin/hello-stack"
echo "reference data shipped inside the image" >"$work/stack/share/data.txt"
mksquashfs "$work/stack" "$work/stack.sqfs" -noappend -quiet -no-progress -all-root
chown -R squser1: "$work"
ls -l "$work/stack.sqfs"

cat >"$work/job.sh" <<JOB
#!/bin/bash
echo "batch step on \$(hostname): SQUASH_MOUNT=\$SQUASH_MOUNT SQUASH_IMAGES=\$SQUASH_IMAGES"
ls -l "\$SQUASH_MOUNT" "\$SQUASH_MOUNT/bin"
cat "\$SQUASH_MOUNT/share/data.txt"
echo
echo "srun step, one task per node; each node's squashd mounted the image once:"
srun -N3 --ntasks-per-node=1 --label bash -c '
	"\$SQUASH_MOUNT/bin/hello-stack"
	$SQUASHCTL list'
JOB
chmod 0755 "$work/job.sh"
chown squser1: "$work/job.sh"

echo
echo "=== sbatch -N3 --squash-image=$work/stack.sqfs --wait job.sh   (as squser1)"
rc=0
(cd "$work" && runuser -u squser1 -- env SLURM_CONF="$SLURM_CONF" \
	sbatch -N3 --squash-image="$work/stack.sqfs" --wait -o "$work/job.out" "$work/job.sh") || rc=$?

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
# sbatch --wait returns at the job's end; the epilogs may still be running.
for i in $(seq 1 100); do
	[ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
	sleep 0.2
done
for node in $SQUASH_TEST_NODES; do
	echo "=== $node after the job (its epilog released the image):"
	"$repo/tests/cluster/cluster.sh" exec "$dir" "$node" $SQUASHCTL list
done
[ "$rc" = 0 ] && echo "=== demo finished: ok" || echo "=== demo failed (exit $rc)"
exit "$rc"

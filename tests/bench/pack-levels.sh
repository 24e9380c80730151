#!/usr/bin/env bash
# mksquashfs time and image size per compression setting, for the choice of
# squash-pack's default (docs/performance.md, "Packing images"). Not part of
# run.sh. Packs TREE (default: the quick stack's tree in BENCH_CACHE, made
# by `run.sh --quick`) with each setting in turn, ROUNDS times, niced like
# the bench; prints CSV: setting,seconds,bytes.
#
#   tests/bench/pack-levels.sh [TREE] [ROUNDS]
set -euo pipefail
cache=${BENCH_CACHE:-/var/tmp/squash-bench}
tree=${1:-$cache/trees/quick-256m}
rounds=${2:-2}
[ -d "$tree" ] || { echo "pack-levels: $tree is not a directory (run tests/bench/run.sh --quick first)" >&2; exit 1; }
out=$(mktemp -d "${TMPDIR:-/var/tmp}/pack-levels.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "setting,seconds,bytes"
for ((r = 0; r < rounds; r++)); do
	for s in "zstd 3" "zstd 9" "zstd 15" "zstd 19" "gzip 9" "lz4" "lz4 hc"; do
		set -- $s
		args=(-comp "$1")
		case "$1:${2:-}" in
		zstd:* | gzip:*) args+=(-Xcompression-level "$2") ;;
		lz4:hc) args+=(-Xhc) ;;
		esac
		t0=$(date +%s.%N)
		nice -n 10 mksquashfs "$tree" "$out/img.sqfs" -noappend -quiet -no-progress \
			-all-root -no-xattrs -b 128K "${args[@]}" >/dev/null
		t1=$(date +%s.%N)
		echo "$s,$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }'),$(stat -c %s "$out/img.sqfs")"
		rm -f "$out/img.sqfs"
	done
done

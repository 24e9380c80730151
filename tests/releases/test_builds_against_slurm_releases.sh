#!/usr/bin/env bash
# Builds the SPANK plugin and squashd's Slurm query (every file that uses
# slurm.h or spank.h) against the public headers of each Slurm release in
# SQUASH_SLURM_HEADERS (default: ../shared/slurm-headers beside the
# checkout; one directory per release holding slurm/slurm.h, slurm/spank.h,
# slurm/slurm_version.h), with warnings as errors. Each release gets its own
# configure run, so the feature checks behind proto/slurm_compat.h decide
# as they would on a machine with that Slurm.
#
# Compile and link only: running against a release needs its daemons (the
# release matrix in tests/run.sh does that for the Debian ones).
#
#   tests/build/test_builds_against_slurm_releases.sh [RELEASE...]
#
# Exits 0 when every release builds, 1 when one does not, 77 (skip) when
# no header sets are there.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
headers=${SQUASH_SLURM_HEADERS:-$repo/../shared/slurm-headers}
work=${SQUASH_BUILD_DIR:-$repo/build}/slurm-releases

if [ ! -d "$headers" ]; then
	echo "SKIP: no Slurm header sets at $headers (set SQUASH_SLURM_HEADERS)"
	exit 77
fi
if [ $# -gt 0 ]; then
	releases=("$@")
else
	mapfile -t releases < <(cd "$headers" && for d in */slurm/spank.h; do echo "${d%%/*}"; done | sort -V)
fi
[ ${#releases[@]} -gt 0 ] || { echo "SKIP: no header sets in $headers"; exit 77; }
[ -x "$repo/configure" ] || (cd "$repo" && autoreconf -fi)

mkdir -p "$work"
base_cache=$work/config.cache.base

# build_release REL: configures and builds against REL's headers, saying
# ok or FAIL; returns 1 on failure.
build_release() {
	local rel=$1 dir inc syms want_mode have_mode ver
	dir=$work/$rel
	inc=$(cd "$headers/$rel" && pwd)
	rm -rf "$dir"
	mkdir -p "$dir"
	# The answers that do not depend on Slurm are reused between releases
	# (configure is the slow part); the Slurm ones are asked again.
	if [ -f "$base_cache" ]; then
		grep -v -e '_cv_slurm' -e 'slurm_spank' -e 'ac_cv_header_slurm' "$base_cache" >"$dir/config.cache"
	fi
	echo "--- Slurm $rel ($inc)"
	if ! (cd "$dir" && "$repo/configure" -q --cache-file=config.cache \
		--with-slurm-includedir="$inc" >configure.log 2>&1); then
		echo "FAIL: configure against Slurm $rel"; tail -20 "$dir/configure.log"
		return 1
	fi
	[ -f "$base_cache" ] || cp "$dir/config.cache" "$base_cache"
	grep -E 'SQUASH_(HOSTLIST|GET_JOB_STEPS|LOAD_JOB)|SLURM_SPANK_INIT_FAILURE|SQUASH_SLURM_BUILD' "$dir/config.h" | sed 's/^/    /'
	if ! make -C "$dir/proto" -s CFLAGS="-g -O0" >"$dir/make.log" 2>&1 ||
	   ! make -C "$dir/spank" -s CFLAGS="-g -O0 -Werror" >>"$dir/make.log" 2>&1 ||
	   ! make -C "$dir/daemon" -s CFLAGS="-g -O0 -Werror" slurm/squashd-slurm_query.o >>"$dir/make.log" 2>&1; then
		echo "FAIL: build against Slurm $rel"; grep -E 'error|warning' "$dir/make.log" | head -20
		return 1
	fi
	# The plugin must carry the 25.05 failure mode exactly where the
	# release knows it, and the release it was built for.
	syms=$(nm -D --defined-only "$dir/spank/.libs/spank_squash.so")
	want_mode=$(grep -c 'slurm_spank_init_failure_mode' "$inc/slurm/spank.h" || true)
	have_mode=$(grep -c ' slurm_spank_init_failure_mode$' <<<"$syms" || true)
	if [ "$want_mode" -gt 0 ] && [ "$have_mode" = 0 ]; then
		echo "FAIL: Slurm $rel has slurm_spank_init_failure_mode, the plugin does not export it"
		return 1
	fi
	ver=$(sed -n 's/^#define SQUASH_SLURM_BUILD_VERSION "\(.*\)"/\1/p' "$dir/config.h")
	case $rel in
	"$ver"*) ;;
	*) echo "FAIL: headers of $rel configured as Slurm $ver"; return 1 ;;
	esac
	echo "ok: Slurm $rel"
}

# The first release alone (it makes the configure cache the others reuse),
# then as many at once as there are CPUs: configure runs on one CPU.
failed=()
build_release "${releases[0]}" || failed+=("${releases[0]}")
jobs=$(nproc)
for ((i = 1; i < ${#releases[@]}; i += jobs)); do
	batch=("${releases[@]:i:jobs}")
	for rel in "${batch[@]}"; do
		build_release "$rel" >"$work/$rel.out" 2>&1 &
	done
	wait
	for rel in "${batch[@]}"; do
		cat "$work/$rel.out"
		grep -q "^ok: Slurm $rel$" "$work/$rel.out" || failed+=("$rel")
	done
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "FAILED: ${failed[*]}"
	exit 1
fi
echo "all ${#releases[@]} releases build"

#!/usr/bin/env bash
# The full test suite of slurm-squash, for a fresh Debian 12 machine, as root:
#
#   ./tests/run.sh               deps, build, make check (unit and root-only
#                                mechanics tests, fuzz corpus replays,
#                                systemd-analyze verify of the units), a
#                                build against each Slurm release's headers
#                                (tests/releases),
#                                make distcheck, integration tests, squashd
#                                under ASan/LSan/UBSan (tests/sanitizers), packages
#                                (.deb and RPM built from make dist, a job
#                                run from the unpacked .deb); then the
#                                release matrix: the same script, unchanged,
#                                inside a Debian 13 root (Slurm 24.11) and a
#                                sid root (Slurm 26.05), one after another
#                                (tests/matrix: roots made with mmdebstrap
#                                on first use, then reused), where the
#                                header builds, distcheck and the
#                                integration tests marked host_release_only
#                                (conftest.py), which do not depend on the
#                                release, are left out (and the RPM:
#                                tests/packaging); then real nodes
#                                (tests/node): the .deb of Debian 12 and of
#                                13 (Debian 13's built with its checks: its
#                                root's make check runs there), installed
#                                with apt in a Debian 12 and a 13 guest
#                                booted by QEMU (systemd, cgroup v2), both
#                                at once
#   ./tests/run.sh --build-only  deps and build only (used by contrib/demo.sh)
#
# Environment: SQUASH_BUILD_DIR (default <repo>/build), PYTEST_ARGS (extra
# pytest arguments), MAKEFLAGS (default -j<ncpu>), SQUASH_RELEASES (which
# releases run, default "host trixie sid": "host" is this machine, every
# other word a Debian suite run in a root; e.g. SQUASH_RELEASES=host for
# local work), SQUASH_ROOTS_DIR (where the roots live, default
# /var/cache/slurm-squash/roots), SQUASH_NODES (the releases booted as
# guests, default "bookworm trixie" as far as they run above: the host
# release and the roots; "" for none). Exits non-zero when any step fails; the
# steps after the build run even when one of them fails, and every release
# runs even when one fails. Inside a root (tests/matrix/run-in-root.sh sets
# SQUASH_MATRIX_SUITE) only that root's release runs.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SQUASH_BUILD_DIR:-$repo/build}
export SQUASH_BUILD_DIR=$build
export MAKEFLAGS=${MAKEFLAGS:--j$(nproc)}
export PYTHONDONTWRITEBYTECODE=1  # keep __pycache__ out of the tree (and of make dist)
export PYTHONUNBUFFERED=1      # steps are piped through tee: keep their lines coming as they are printed
failed=()
suite_start=$(date +%s)
# Each step's output is kept too, so that what made a step fail is shown
# again at the end: CI shows the end of a run, not the whole of it.
step_logs=$(mktemp -d /tmp/squash-run-steps.XXXXXX) || exit 1
trap 'rm -rf "$step_logs"' EXIT

step() { # name command...
	local name=$1 t0 rc
	shift
	echo
	echo "=== $name"
	t0=$(date +%s)
	"$@" 2>&1 | tee "$step_logs/${#failed[@]}.log"
	rc=${PIPESTATUS[0]}
	if [ $rc = 0 ]; then
		echo "=== $name: ok ($(( $(date +%s) - t0 )) s)"
	elif [ $rc = 77 ]; then
		echo "=== $name: skipped (see above)"
		rc=0
	else
		echo "=== $name: FAILED (exit $rc, $(( $(date +%s) - t0 )) s)"
		failed+=("$name")
	fi
	return $rc
}

build() {
	(cd "$repo" && autoreconf -fi) || return 1
	mkdir -p "$build" || return 1
	if [ ! -f "$build/Makefile" ]; then
		(cd "$build" && "$repo/configure") || return 1
	fi
	make -C "$build"
}

pytest_cmd() {
	if python3 -m pytest --version >/dev/null 2>&1; then
		echo python3
	else
		echo /usr/bin/python3
	fi
}

integration() {
	local py
	py=$(pytest_cmd)
	# The slowest tests at the end of each release's run: where CI's
	# minutes go (the budget: a new test buys its minutes).
	# shellcheck disable=SC2086
	(cd "$repo" && "$py" -m pytest -p no:cacheprovider tests/integration -v --durations=15 ${PYTEST_ARGS:-})
}

check() {
	make -C "$build" check && return 0
	cat "$build"/tests/test-suite.log 2>/dev/null
	return 1
}

# describe ROOT: the release in ROOT ("" for this machine): distribution,
# Slurm, squashfuse, libfuse, squashfs-tools.
describe() {
	local r=${1:-} v p out
	out=$(. "$r/etc/os-release" && echo "$PRETTY_NAME")
	for p in slurmd squashfuse libfuse3-dev squashfs-tools; do
		v=$(dpkg-query --admindir="$r/var/lib/dpkg" -W -f='${Version}' "$p" 2>/dev/null || echo none)
		out="$out, ${p%-dev} $v"
	done
	echo "$out"
}

# The whole suite inside the root of Debian suite $1, each line of its
# output marked with the suite.
in_root() {
	local env=()
	# A release booted as a guest later (tests/node) gets its .deb built
	# with its checks by the root's packaging step, into $build/debs/SUITE.
	if [[ " $nodes " == *" $1 "* ]]; then
		mkdir -p "$build/debs/$1"
		env=(SQUASH_MATRIX_OUTPUT="$build/debs/$1" SQUASH_TEST_DEB_OUTPUT="$build/debs/$1" SQUASH_TEST_DEB_CHECK=1)
	fi
	env "${env[@]}" "$repo/tests/matrix/run-in-root.sh" "$1" ./tests/run.sh 2>&1 | sed -u "s/^/[$1] /"
}

# The roots of this run whose .deb is built with its checks (a guest of
# their release boots it, in_root).
root_suites_with_deb_checks() {
	local s
	for s in $releases; do
		[ "$s" != host ] && [[ " $nodes " == *" $s "* ]] && echo "$s"
	done
}

# The releases booted as guests: those of SQUASH_NODES that run above.
node_suites() {
	local s host_suite
	host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	for s in $nodes; do
		if [ "$s" = "$host_suite" ]; then
			[[ " $releases " == *" host "* ]] && echo "$s"
		elif [[ " $releases " == *" $s "* ]]; then
			echo "$s"
		fi
	done
}

[ "$(id -u)" = 0 ] || { echo "tests/run.sh: run as root (the tests start daemons and mount images)" >&2; exit 1; }

releases=${SQUASH_RELEASES:-host trixie sid}
[ -n "${SQUASH_MATRIX_SUITE:-}" ] && releases=host
[ "${1:-}" = --build-only ] && releases=host
nodes=${SQUASH_NODES-bookworm trixie}
[ -n "${SQUASH_MATRIX_SUITE:-}" ] && nodes=""
summary=()

step "install dependencies" "$repo/contrib/install-deps.sh" || exit 1
if [[ " $releases " == *" host "* ]]; then
	echo "=== release: $(describe "")"
	step "build ($build)" build || exit 1
	[ "${1:-}" = --build-only ] && exit 0
	n_failed=${#failed[@]}
	# A root whose .deb is built with its checks (a guest boots it:
	# SQUASH_TEST_DEB_CHECK from in_root) runs make check there, on the
	# tarball, with this release's compiler and Slurm: not twice.
	if [ -n "${SQUASH_MATRIX_SUITE:-}" ] && [ "${SQUASH_TEST_DEB_CHECK:-0}" = 1 ]; then
		echo
		echo "=== make check: in the .deb's build below (dpkg-buildpackage with its checks)"
	else
		step "make check" check
	fi
	# What does not depend on the release runs once, on this machine: the
	# other Slurms' headers and the tarball's completeness (the roots
	# still build and check the tree with their own compiler and Slurm).
	if [ -z "${SQUASH_MATRIX_SUITE:-}" ]; then
		step "build against every Slurm release's headers" "$repo/tests/releases/test_builds_against_slurm_releases.sh"
		# Its own make check is left out when a root builds its .deb
		# from the same tarball with its checks (a guest of that release
		# boots it): the tarball's tests then run there, once.
		if [ -n "$(root_suites_with_deb_checks)" ]; then
			step "make distcheck" make -C "$build" distcheck TESTS=
		else
			step "make distcheck" make -C "$build" distcheck
		fi
	fi
	step "integration tests" integration
	step "sanitizers" "$repo/tests/sanitizers/run.sh"
	# The host release's .deb, kept when a guest of this release boots it
	# later (tests/node); no stale one is left for it. Without its checks:
	# make check ran above, on this release (a root's .deb runs the
	# tarball's).
	rm -rf "$build/debs"
	host_suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	if [[ " $nodes " == *" $host_suite "* ]]; then
		SQUASH_TEST_DEB_OUTPUT=$build/debs/$host_suite \
			step "packages" "$repo/tests/packaging/test_packages.sh"
	else
		step "packages" "$repo/tests/packaging/test_packages.sh"
	fi
	[ ${#failed[@]} = "$n_failed" ] && verdict=ok || verdict=FAILED
	summary+=("${SQUASH_MATRIX_SUITE:-host}: $(describe ""): $verdict ($(( $(date +%s) - suite_start )) s)")
fi

# The release matrix, one release after the other (2 cores: never at once).
for suite in $releases; do
	[ "$suite" = host ] && continue
	t0=$(date +%s)
	if step "release $suite (whole suite in a Debian $suite root)" in_root "$suite"; then
		verdict=ok
	else
		verdict=FAILED
	fi
	summary+=("$suite: $(describe "${SQUASH_ROOTS_DIR:-/var/cache/slurm-squash/roots}/$suite"): $verdict ($(( $(date +%s) - t0 )) s)")
done

# Real nodes: each release's .deb (from its packaging step above) in a
# guest with systemd and cgroup v2, one after the other.
node_list=$(node_suites | xargs)
if [ -n "$node_list" ] && [ "${1:-}" != --build-only ]; then
	t0=$(date +%s)
	if step "real nodes: $node_list (tests/node, Debian guests under QEMU)" \
		env SQUASH_NODE_DEBS="$build/debs" "$repo/tests/node/run.sh" $node_list; then
		verdict=ok
	else
		verdict=FAILED
	fi
	summary+=("guests $node_list: systemd, cgroup v2, the .deb installed with apt: $verdict ($(( $(date +%s) - t0 )) s)")
fi

# What made each failed step fail, again: its error lines and its end.
for i in "${!failed[@]}"; do
	echo
	echo "=== why ${failed[$i]} failed: its lines that say so, then its last 40"
	grep -E 'FAIL|\bERROR\b|\bError\b|error:|[Aa]ssert|failed|not ok|Sanitizer|runtime error' \
		"$step_logs/$i.log" | tail -n 40
	echo "--- the end of its output:"
	tail -n 40 "$step_logs/$i.log"
done

echo
[ ${#summary[@]} = 0 ] || printf '=== %s\n' "${summary[@]}"
echo "=== total $(( $(date +%s) - suite_start )) s"
if [ ${#failed[@]} -gt 0 ]; then
	printf '=== FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "=== all passed"

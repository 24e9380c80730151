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
#                                run from the unpacked .deb)
#   ./tests/run.sh --build-only  deps and build only (used by contrib/demo.sh)
#
# Environment: SQUASH_BUILD_DIR (default <repo>/build), PYTEST_ARGS (extra
# pytest arguments), MAKEFLAGS (default -j<ncpu>). Exits non-zero when any
# step fails; the steps after the build run even when one of them fails.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${SQUASH_BUILD_DIR:-$repo/build}
export SQUASH_BUILD_DIR=$build
export MAKEFLAGS=${MAKEFLAGS:--j$(nproc)}
export PYTHONDONTWRITEBYTECODE=1  # keep __pycache__ out of the tree (and of make dist)
failed=()
suite_start=$(date +%s)

step() { # name command...
	local name=$1 t0 rc
	shift
	echo
	echo "=== $name"
	t0=$(date +%s)
	"$@"
	rc=$?
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
	# shellcheck disable=SC2086
	(cd "$repo" && "$py" -m pytest -p no:cacheprovider tests/integration -v ${PYTEST_ARGS:-})
}

[ "$(id -u)" = 0 ] || { echo "tests/run.sh: run as root (the tests start daemons and mount images)" >&2; exit 1; }

step "install dependencies" "$repo/contrib/install-deps.sh" || exit 1
step "build ($build)" build || exit 1
[ "${1:-}" = --build-only ] && exit 0

check() {
	make -C "$build" check && return 0
	cat "$build"/tests/test-suite.log 2>/dev/null
	return 1
}

step "make check" check
step "build against every Slurm release's headers" "$repo/tests/releases/test_builds_against_slurm_releases.sh"
step "make distcheck" make -C "$build" distcheck
step "integration tests" integration
step "sanitizers" "$repo/tests/sanitizers/run.sh"
step "packages" "$repo/tests/packaging/test_packages.sh"

echo
echo "=== total $(( $(date +%s) - suite_start )) s"
if [ ${#failed[@]} -gt 0 ]; then
	printf '=== FAILED: %s\n' "${failed[@]}"
	exit 1
fi
echo "=== all passed"

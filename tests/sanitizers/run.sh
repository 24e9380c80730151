#!/usr/bin/env bash
# squashd and the unit tests under AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer (a step of tests/run.sh):
#
#   1. builds the tree with ./configure --enable-sanitizers in
#      ${SQUASH_BUILD_DIR}-asan and runs `make check` there;
#   2. runs the integration tests that drive squashd hardest (bursts,
#      restarts, hung file systems, dead FUSE servers, a full state
#      directory, readers shared by a user's mounts) against the sanitized
#      squashd, with the plugin and tools
#      of the normal build (slurmd cannot load an ASan-built plugin), and
#      the tests that run squash-reader --serve themselves (mounts going
#      and taken over while read, serve_pool.c) with the sanitized reader
#      (SQUASH_READER; squashd starts readers with an empty environment,
#      so the ones it runs are the normal build's);
#   3. fails when a sanitizer wrote any report;
#   4. runs squash-reader's image parser under libFuzzer with ASan and UBSan
#      (tests/fuzz/run.sh reader) for SQUASH_FUZZ_SECONDS (default 6; 0
#      skips it) from its seed corpus: a short run that catches what a
#      change broke, not a search (longer runs: tests/fuzz/README.md).
#
# In the release matrix's roots (SQUASH_MATRIX_SUITE set) nothing runs:
# squashd's code and the unit tests are the same on every release, the
# host runs them under the sanitizers, and the time the whole matrix may
# take is not (40 minutes on 2 cores; the roots' make check at -Wall
# -Wextra still builds and runs every unit test with their compilers).
#
# valgrind is not used for squashd: Debian 12's valgrind (3.19) does not
# know pidfd_open(2), which squashd needs for every child it starts.
set -uo pipefail

if [ -n "${SQUASH_MATRIX_SUITE:-}" ]; then
	echo "sanitizers: run on the host release only"
	exit 77
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${SQUASH_BUILD_DIR:-$repo/build}
asan_build=$build-asan
reports=$(mktemp -d /tmp/squash-sanitizers.XXXXXX)
trap 'rm -rf "$reports"' EXIT

mkdir -p "$asan_build" || exit 1
if [ ! -f "$asan_build/Makefile" ]; then
	(cd "$asan_build" && "$repo/configure" --enable-sanitizers >/dev/null) || exit 1
fi
make -C "$asan_build" >/dev/null || exit 1
if ! make -C "$asan_build" check >/dev/null; then
	cat "$asan_build"/tests/test-suite.log 2>/dev/null
	echo "sanitizers: make check failed under ASan/UBSan" >&2
	exit 1
fi

py=python3
python3 -m pytest --version >/dev/null 2>&1 || py=/usr/bin/python3
export SQUASH_SQUASHD=$asan_build/daemon/squashd
export ASAN_OPTIONS=detect_leaks=1:log_path=$reports/asan
export LSAN_OPTIONS=suppressions=$repo/tests/sanitizers/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:log_path=$reports/ubsan
export SQUASH_READER=$asan_build/daemon/reader/squash-reader
(cd "$repo" && "$py" -m pytest -p no:cacheprovider -q tests/integration/test_load.py \
	tests/integration/test_faults.py tests/integration/test_one_reader_per_user.py \
	tests/integration/test_serve_reader_under_load.py \
	tests/integration/test_reader_stores_the_next_small_files_ahead.py)
rc=$?

if compgen -G "$reports/*" >/dev/null; then
	echo "sanitizers: squashd or squash-reader reported errors:" >&2
	cat "$reports"/* >&2
	exit 1
fi
[ $rc = 0 ] && echo "sanitizers: squashd and squash-reader --serve clean under ASan, LSan and UBSan"

fuzz_seconds=${SQUASH_FUZZ_SECONDS:-6}
if [ "$fuzz_seconds" != 0 ]; then
	fuzz_artifacts=${TMPDIR:-/tmp}/squash-fuzz-reader
	# (the sanitizer options above are squashd's: log files, suppressions)
	if env -u ASAN_OPTIONS -u LSAN_OPTIONS -u UBSAN_OPTIONS FUZZ_ARTIFACTS="$fuzz_artifacts" \
		"$repo/tests/fuzz/run.sh" reader "$fuzz_seconds" \
		>"$reports/fuzz.log" 2>&1; then
		echo "sanitizers: $(tail -n 1 "$reports/fuzz.log"), nothing found"
		rmdir "$fuzz_artifacts" 2>/dev/null # (empty: nothing to keep)
	else
		cat "$reports/fuzz.log"
		echo "sanitizers: the reader fuzzer found a crash, leak or hang (reproducer in $fuzz_artifacts)" >&2
		rc=1
	fi
	rm -f "$reports/fuzz.log"
fi
exit $rc

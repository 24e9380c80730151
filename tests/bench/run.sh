#!/usr/bin/env bash
# The slurm-squash benchmark: one command, as root, on a Debian 12 machine.
#
#   tests/bench/run.sh [--quick] [bench.py options]
#   tests/bench/run.sh --datasets [hcp,1m] [--reps N] [--lock FILE]
#   tests/bench/run.sh --small-files [--reps N] [--lock FILE]
#
# Builds what it needs (the project, if SQUASH_BUILD_DIR holds no build, and
# with it the slow-filesystem stand-in tests/bench/slowfs.c and the squashd
# burst client tests/bench/burst.c; a venv with matplotlib; the pinned Python stack from
# PyPI; images in several formats), runs every workload in every mode, cold
# and warm, interleaved, then the product's own costs on a throwaway Slurm
# cluster (tests/cluster/cluster.sh), and writes report.md, results.csv and
# PNG plots into the output directory (default
# $BENCH_CACHE/results/<date>). `--quick` takes a few minutes (small stack,
# one repetition); the full run about half an hour on 2 cores.
# `--datasets` instead
# lists synthetic datasets of many small files (tests/bench/dataset.py: an
# HCP-like one of 186,432 entries in 56 bundles, one of 1,015,808 files in
# 1,024 bundles; made once into $BENCH_CACHE/datasets) and reads 10,000
# random files of them, from local disk, slowfs and bundles merged in a job
# (kernel bundles by overlayfs; FUSE bundles by overlayfs, squashd.conf
# fuse_union = no, and as one squash-reader union, fuse_union = yes), and
# measures the job's start and the node's memory with the bundles mounted,
# and two concurrent 1,024-bundle jobs of one user; `--lock FILE` holds
# flock(FILE) during each dataset's repetition only (a machine shared with
# other cluster users; in the other modes it is held for the whole run:
# do not pass it from a script already running under flock(FILE)). `--small-files` instead reads every file of a tree
# of 24,000 small files in a job, from the user's image (squash-reader) and
# the same image trusted (the kernel's squashfs), cold, interleaved
# (tests/bench/small_files.py, which has its own options; `--lock FILE`
# holds flock(FILE) while its cluster runs). `tests/bench/bench.py --help`
# lists every option of the other modes.
#
# Environment:
#   BENCH_CACHE       downloads, venv, trees, images, mount points
#                     (default /var/tmp/squash-bench; not in git)
#   SQUASH_BUILD_DIR  the project's build directory (default <repo>/build)
#   BENCH_NICE        niceness of the whole run (default 10: the machine is shared)
#
# Everything it starts (FUSE servers, mounts, loop devices, clusters) is
# stopped on exit, Ctrl-C included. Drops the page cache (all of the
# machine's) before every cold run. Not part of tests/run.sh or make check.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${BENCH_CACHE:-/var/tmp/squash-bench}
build=${SQUASH_BUILD_DIR:-$repo/build}
export BENCH_CACHE=$cache SQUASH_BUILD_DIR=$build

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

case " $* " in
*" -h "* | *" --help "*) exec /usr/bin/python3 "$here/bench.py" --help ;;
esac
[ "$(id -u)" = 0 ] || die "run as root (mounts, loop devices, drop_caches, a Slurm cluster)"

renice -n "${BENCH_NICE:-10}" -p $$ >/dev/null

# ------------------------------------------------------------ tools
need=()
for t in mksquashfs squashfuse_ll gcc pkg-config fusermount3 runuser; do
	command -v "$t" >/dev/null || need+=("$t")
done
if [ ${#need[@]} -gt 0 ] || [ ! -x "$build/daemon/squashd" ] ||
   [ ! -f "$build/spank/.libs/spank_squash.so" ] || [ ! -f "$build/tests/Makefile" ]; then
	log "building the project first (tests/run.sh --build-only)"
	"$repo/tests/run.sh" --build-only
fi

# The small-files mode needs neither the venv nor the benchmark's C tools.
if [ "${1:-}" = --small-files ]; then
	shift
	exec /usr/bin/python3 "$here/small_files.py" "$@"
fi

mkdir -p "$cache"/wheels
chmod 0755 "$cache"
# The benchmark's C tools are built with the project (tests/Makefile.am).
make -C "$build/tests" --no-print-directory -s bench/slowfs bench/burst

# ------------------------------------------------------------ Python
# One venv (the system python3) that downloads the pinned wheels once into
# $cache/wheels and runs bench.py with matplotlib for the plots.
#
# Inside a root of tests/matrix (SQUASH_MATRIX_SUITE set: another Debian
# release, another python3) the host's venv, wheels and tree do not fit that
# python: bench.py runs with the root's /usr/bin/python3, the tree and images
# are the host's (run the benchmark once on the host first, and give the root
# the host's cache: SQUASH_MATRIX_OUTPUT=$BENCH_CACHE), the import and start
# workloads are not available (the tree's compiled modules are the host
# python's), and the plots are made afterwards on the host:
#   $BENCH_CACHE/venv/bin/python tests/bench/report.py OUT
py=$cache/venv/bin/python
if [ -n "${SQUASH_MATRIX_SUITE:-}" ]; then
	py=/usr/bin/python3
	[ -d "$cache/trees" ] ||
		die "in a root ($SQUASH_MATRIX_SUITE): no tree in $cache/trees; run the benchmark on the host first and pass its cache (SQUASH_MATRIX_OUTPUT=$cache)"
	export BENCH_NO_PLOTS=1
	log "in the $SQUASH_MATRIX_SUITE root: $($py -V), no venv, no plots ($cache/venv/bin/python tests/bench/report.py OUT on the host makes them)"
else
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || die "python3 venv module missing (apt-get install python3-venv)"
venv=$cache/venv
if [ ! -x "$venv/bin/python" ]; then
	log "creating $venv"
	/usr/bin/python3 -m venv "$venv"
fi
pip_quiet=(--quiet --disable-pip-version-check)
reqs=(stack-full.txt stack-quick.txt plot-requirements.txt)
case " $* " in
*" --datasets"*) reqs=(plot-requirements.txt) ;;  # no Python stack in the dataset mode
esac
for req in "${reqs[@]}"; do
	stamp=$cache/wheels/.$req.stamp
	if [ ! -f "$stamp" ] || [ "$here/$req" -nt "$stamp" ]; then
		log "downloading the wheels of $req into $cache/wheels"
		"$venv/bin/pip" download "${pip_quiet[@]}" --only-binary=:all: --no-deps \
			-d "$cache/wheels" -r "$here/$req"
		touch "$stamp"
	fi
done
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
	log "installing matplotlib into $venv"
	"$venv/bin/pip" install "${pip_quiet[@]}" --no-index --find-links "$cache/wheels" \
		-r "$here/plot-requirements.txt"
fi
fi

# ------------------------------------------------------------ run
# bench.py cleans up after itself (also on Ctrl-C); this trap is the safety
# net for whatever a hard failure left.
cleanup() {
	"$py" "$here/bench.py" --cleanup-only >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$py" "$here/bench.py" "$@"

#!/usr/bin/env bash
# Installs what slurm-squash needs to build, test and run on Debian 12
# (bookworm), 13 (trixie) or sid (or a close relative). Idempotent:
# packages already installed are not touched, and apt is not called at all
# when nothing is missing. Run as root.
#
#   contrib/install-deps.sh          install what is missing
#   contrib/install-deps.sh --list   print the package names for this release
#
# The names are the same on every release where a name of its own exists:
# -dev packages and metapackages (libclang-rt-dev, not libclang-rt-14-dev;
# libslurm-dev, whose library package is libslurm38, libslurm42t64 or
# libslurm45t64). SQUASH_DEPS_RELEASE=CODENAME asks for another release's
# list (tests/matrix/build-root.sh uses it to fill a root).
set -euo pipefail

# The release: VERSION_CODENAME of /etc/os-release (sid says forky/sid in
# PRETTY_NAME and the next release's codename in VERSION_CODENAME).
release=${SQUASH_DEPS_RELEASE:-}
if [ -z "$release" ] && [ -r /etc/os-release ]; then
	release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
fi

packages=(
	build-essential autoconf automake libtool pkg-config
	libslurm-dev slurm-wlm slurmd slurmctld slurm-client
	libfuse3-dev fuse3 squashfuse libsquashfuse-dev libzstd-dev liblzma-dev
	libsystemd-dev systemd
	libprotobuf-c-dev protobuf-c-compiler
	libmunge-dev munge
	squashfs-tools
	# squash-pack rewrites RPATH/RUNPATH for longer targets with patchelf
	# (tests/tools/test_squash_pack.sh covers it when installed).
	patchelf
	python3 python3-pytest python3-prometheus-client
	# What the harness runs that a minimal system lacks (a container or an
	# mmdebstrap root): pgrep/ps, ip/ss, useradd, git for autoreconf's
	# checkout, mmdebstrap for the Debian 13/sid roots of tests/matrix.
	procps iproute2 passwd git ca-certificates mmdebstrap
	# libFuzzer (tests/fuzz): the default clang's runtime on every release.
	clang libclang-rt-dev valgrind
	debhelper dpkg-dev fakeroot rpm
)
# (bash keeps the comment lines out of the array: they are comments.)
# QEMU for tests/node's guests, which boot on the host only: not in the
# package lists of the matrix roots (SQUASH_DEPS_RELEASE, build-root.sh),
# nor wanted by the suite run inside one (SQUASH_MATRIX_SUITE,
# run-in-root.sh), which has no network to fetch it.
# (e2fsprogs' mkfs.ext4 -d makes their disks; it is in every Debian.)
[ -n "${SQUASH_DEPS_RELEASE:-}" ] || [ -n "${SQUASH_MATRIX_SUITE:-}" ] || packages+=(qemu-system-x86)

case "$release" in
bookworm | trixie | forky | sid | "") ;;
*) echo "install-deps.sh: release '$release' untested; trying Debian 13's names" >&2 ;;
esac

if [ "${1:-}" = --list ]; then
	printf '%s\n' "${packages[@]}"
	exit 0
fi

[ "$(id -u)" = 0 ] || { echo "install-deps.sh: run as root" >&2; exit 1; }

missing=()
for p in "${packages[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	echo "install-deps.sh: installing ${missing[*]}"
	# Do not start the packaged munged/slurmd/slurmctld: the demo and the
	# tests run their own throwaway instances.
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
else
	echo "install-deps.sh: all packages present"
fi

# pytest: tests/run.sh uses `python3 -m pytest` when the first python3 on
# PATH has it, else the distribution's /usr/bin/python3 (python3-pytest).
if python3 -m pytest --version >/dev/null 2>&1; then
	echo "install-deps.sh: pytest: python3 -m pytest ($(command -v python3))"
elif /usr/bin/python3 -m pytest --version >/dev/null 2>&1; then
	echo "install-deps.sh: pytest: /usr/bin/python3 -m pytest"
else
	echo "install-deps.sh: no python with pytest found" >&2
	exit 1
fi

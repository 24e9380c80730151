#!/usr/bin/env bash
# Installs what slurm-squash needs to build, test and run on Debian 12 (or a
# close relative). Idempotent: packages already installed are not touched,
# and apt is not called at all when nothing is missing. Run as root.
set -euo pipefail

packages=(
	build-essential autoconf automake libtool pkg-config
	libslurm-dev slurm-wlm slurmd slurmctld slurm-client
	libfuse3-dev fuse3 squashfuse libsquashfuse-dev
	libsystemd-dev systemd
	libprotobuf-c-dev protobuf-c-compiler
	libmunge-dev munge
	squashfs-tools
	python3 python3-pytest python3-prometheus-client iproute2
	clang libclang-rt-14-dev valgrind
	debhelper dpkg-dev fakeroot rpm
)

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

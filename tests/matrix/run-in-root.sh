#!/usr/bin/env bash
# Runs a command inside a Debian root made by tests/matrix/build-root.sh, in
# private namespaces, with this checkout mounted at the same path:
#
#   tests/matrix/run-in-root.sh SUITE [CMD [ARG...]]    (default CMD: bash)
#
# e.g. `tests/matrix/run-in-root.sh trixie ./tests/run.sh` runs the whole
# suite against Debian 13's Slurm 24.11. The command starts in the
# checkout, as root, with SQUASH_BUILD_DIR=<checkout>/build-SUITE
# (SQUASH_MATRIX_BUILD_DIR overrides it). The root and the checkout are
# overlays: what the command writes to them (users, installed packages,
# autoreconf's files, builds) lives in a tmpfs and is gone when it ends;
# the cached root, the host's tree and its builds are not touched.
#
# Namespaces: mount (private: nothing propagates to or from the host), pid
# (the command's tree is killed as a whole when it ends, daemons included),
# uts (hostname squash-SUITE), ipc and net (only lo, up, with 127.0.0.1 and
# 127.0.1.1, the address the root's /etc/hosts gives squash-SUITE: Slurm
# 24.11 wants an address of its hostname besides 127.0.0.1). Test clusters
# inside can neither see nor collide with those on the host (ports, /tmp
# locks, processes). SQUASH_MATRIX_NET=host keeps the host's network (apt
# works then). In the root: /dev (the host's: loop devices, /dev/fuse), a
# new /proc, /sys with the host's cgroup hierarchies, and tmpfs on /tmp,
# /run and /dev/shm.
#
# Everything goes away when the command ends, however it ends: the pid
# namespace's first process exits last and the kernel kills the rest, the
# mount namespace and its mounts die with the last process. Loop devices
# that outlive it (one attached without autoclear whose backing file lived
# in the root's /tmp) are detached and reported; the exit code is then 125
# unless the command already failed.
# SQUASH_MATRIX_OUTPUT=DIR (a host directory) is mounted at the same path
# in the root, writable: what the command puts there stays, e.g.
#   SQUASH_MATRIX_OUTPUT=/srv/debs tests/matrix/run-in-root.sh trixie bash -c \
#     'autoreconf -fi && ./configure && make dist && contrib/build-deb.sh slurm-squash-*.tar.gz /srv/debs'
# Passed into the root: TERM, MAKEFLAGS, PYTEST_ARGS, SQUASH_TEST_*,
# SQUASH_KEEP_*.
set -euo pipefail

die() { echo "run-in-root.sh: $*" >&2; exit 1; }

self=$(readlink -f "${BASH_SOURCE[0]}")
repo=$(cd "$(dirname "$self")/../.." && pwd)

# ------------------------------------------------ inside the new namespaces
# run-in-root.sh --inside SUITE ROOT CMD...: pid 1 of the new pid namespace.
inside() {
	local suite=$1 root=$2 build rc
	shift 2
	# Everything mounted below stays in this namespace: private from the start.
	mount --make-rprivate /
	if [ "${SQUASH_MATRIX_NET:-}" != host ]; then
		ip link set lo up
		ip addr add 127.0.1.1/8 dev lo
	fi
	hostname "squash-$suite"
	# What the run writes, to the root and to the checkout, goes to one
	# tmpfs of this run, through overlays: the cached root stays as
	# build-root.sh made it, the host's tree and builds as they were (the
	# suite's autoreconf runs another autoconf), and all of it is gone with
	# the namespace. The tmpfs sits on an empty directory beside the root,
	# in this namespace only. (The root is a mount of its own then, as
	# unshare --propagation and mount(MS_PRIVATE) on "/" need: cluster.sh's
	# nodes, the plugin's step namespaces.)
	local writes=${root%/*}/.writes-$suite
	mkdir -p "$writes"
	mount -t tmpfs -o mode=0700 matrix-writes "$writes"
	mkdir -p "$writes"/{root,checkout}/{upper,work}
	chmod 0755 "$writes/root/upper" "$writes/checkout/upper"
	mount -t overlay -o "lowerdir=$root,upperdir=$writes/root/upper,workdir=$writes/root/work" \
		"squash-$suite" "$root"
	mkdir -p "$root$repo"
	mount -t overlay -o "lowerdir=$repo,upperdir=$writes/checkout/upper,workdir=$writes/checkout/work" \
		checkout "$root$repo"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
	mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
	mount -t sysfs -o nosuid,nodev,noexec sysfs "$root/sys"
	# The host's cgroup hierarchies, as the host has them: site-like test
	# clusters (cluster.sh's SQUASH_TEST_SITE) make cgroups of their own in them.
	if mountpoint -q /sys/fs/cgroup; then
		mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
	fi
	mount -t tmpfs -o mode=1777,nosuid,nodev tmp "$root/tmp"
	mount -t tmpfs -o mode=0755,nosuid,nodev run "$root/run"
	# The test clusters with a job namespace live in /home/.squash-tests
	# (each job gets a private /tmp), and their :rw tests put overlayfs
	# upper directories there, which the root's own overlay cannot hold.
	mount -t tmpfs -o mode=0755 home "$root/home"
	mkdir -p "$root/run/lock"
	chmod 1777 "$root/run/lock"
	# A host directory the command may write to (e.g. packages it builds).
	if [ -n "${SQUASH_MATRIX_OUTPUT:-}" ]; then
		mkdir -p "$root$SQUASH_MATRIX_OUTPUT"
		mount --bind "$SQUASH_MATRIX_OUTPUT" "$root$SQUASH_MATRIX_OUTPUT"
	fi
	if [ "${SQUASH_MATRIX_NET:-}" = host ]; then
		mount --bind /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null ||
			cp /etc/resolv.conf "$root/etc/resolv.conf"
	fi
	build=${SQUASH_MATRIX_BUILD_DIR:-$repo/build-$suite}
	local env=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		LANG=C.UTF-8 SHELL=/bin/bash USER=root LOGNAME=root SQUASH_BUILD_DIR="$build"
		SQUASH_MATRIX_SUITE="$suite")
	local v
	while IFS= read -r v; do
		case "$v" in
		TERM=* | MAKEFLAGS=* | PYTEST_ARGS=* | SQUASH_TEST_*=* | SQUASH_KEEP_*=*) env+=("$v") ;;
		esac
	done < <(env)
	[ $# -gt 0 ] || set -- bash
	# The root becomes the namespace's "/" (pivot_root, the old root
	# detached), not a chroot: nsenter -m (cluster.sh's nodes) and setns(2)
	# put a process at its mount namespace's root, which must be the root.
	cd "$root"
	pivot_root . .
	umount -l .
	cd /
	# Not exec: this shell stays pid 1 and reaps the orphans of the tree
	# (daemons started with setsid); its exit ends the namespace.
	rc=0
	/usr/bin/env -i "${env[@]}" /bin/bash -c 'cd "$1" && shift && exec "$@"' \
		run-in-root "$repo" "$@" || rc=$?
	return "$rc"
}

if [ "${1:-}" = --inside ]; then
	shift
	inside "$@"
	exit $?
fi

# ------------------------------------------------ on the host
[ $# -ge 1 ] || die "usage: $0 SUITE [CMD [ARG...]]"
[ "$(id -u)" = 0 ] || die "run as root"
suite=$1
shift
root=$("$repo/tests/matrix/build-root.sh" "$suite" | tail -n 1)
[ -f "$root/etc/slurm-squash-root" ] || die "no usable root for $suite at $root"

# Loop devices attached now, to tell which ones the run left.
loops_before=$(losetup -n -O NAME 2>/dev/null | sort || true)

ns=(--mount --pid --fork --uts --ipc --kill-child)
[ "${SQUASH_MATRIX_NET:-}" = host ] || ns+=(--net)
rc=0
unshare "${ns[@]}" -- "$self" --inside "$suite" "$root" "$@" || rc=$?

# The namespaces are gone. A loop device attached in them without autoclear
# (its backing file in the root's /tmp, which no longer has a path here)
# would stay: detach those, and say so.
left=$(comm -13 <(echo "$loops_before") <(losetup -n -O NAME 2>/dev/null | sort || true))
for dev in $left; do
	back=$(cat "/sys/block/${dev#/dev/}/loop/backing_file" 2>/dev/null || true)
	case "$back" in
	/tmp/* | "$repo"/*)
		[ -e "$back" ] && case "$back" in /tmp/*) continue ;; esac
		echo "run-in-root.sh: $suite left loop device $dev ($back): detaching it" >&2
		losetup -d "$dev" 2>/dev/null || true
		[ "$rc" != 0 ] || rc=125
		;;
	esac
done
exit "$rc"

#!/usr/bin/env bash
# Makes (or reuses) a Debian root for running the test suite against
# another Debian release's Slurm, squashfuse, libfuse and tools:
#
#   tests/matrix/build-root.sh SUITE      e.g. trixie (Slurm 24.11), sid (26.05)
#
# The root is $SQUASH_ROOTS_DIR/SUITE (default /var/cache/slurm-squash/roots,
# outside the checkout so that every clone and worktree shares it), made
# with mmdebstrap from Debian's archive ($SQUASH_ROOT_MIRROR, default
# http://deb.debian.org/debian): minbase plus every package that
# contrib/install-deps.sh lists for that release, so the suite run inside
# downloads nothing. A root is complete once its stamp file
# (etc/slurm-squash-root) exists; an incomplete one is made again from
# nothing. When present, a root is reused: only the packages install-deps
# asks for since it was made get installed (with the host's network).
# Prints the root's path on stdout as its last line. Run as root.
set -euo pipefail

die() { echo "build-root.sh: $*" >&2; exit 1; }
log() { echo "build-root.sh: $*" >&2; }

[ $# = 1 ] || die "usage: $0 SUITE (trixie, sid, ...)"
suite=$1
case "$suite" in
'' | *[!a-z0-9-]*) die "bad suite name '$suite'" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root"

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
roots=${SQUASH_ROOTS_DIR:-/var/cache/slurm-squash/roots}
mirror=${SQUASH_ROOT_MIRROR:-http://deb.debian.org/debian}
root=$roots/$suite
stamp=$root/etc/slurm-squash-root
deps=$repo/contrib/install-deps.sh

mkdir -p "$roots"
# Two runs that want the same root at once: the second waits for the first.
exec {lock}>"$roots/.$suite.lock"
flock "$lock"

# The package list for the suite; its hash tells whether a reused root
# still has everything.
want=$(SQUASH_DEPS_RELEASE=$suite "$deps" --list 2>/dev/null)
want_hash=$(sha256sum <<<"$want" | cut -c1-16)

# Runs install-deps.sh inside the root with the host's network, in a
# private mount namespace that ends (with its mounts) when the command does.
refresh() {
	unshare --mount --propagation private -- bash -euo pipefail -c '
		root=$1 repo=$2
		mount --rbind /dev "$root/dev"
		mount -t proc proc "$root/proc"
		mount -t sysfs sysfs "$root/sys"
		mkdir -p "$root$repo"
		mount --bind -o ro "$repo" "$root$repo"
		cp /etc/resolv.conf "$root/etc/resolv.conf"
		chroot "$root" "$repo/contrib/install-deps.sh"
	' refresh "$root" "$repo"
}

if [ -f "$stamp" ]; then
	have_hash=$(sed -n 's/^deps=//p' "$stamp")
	if [ "$have_hash" != "$want_hash" ]; then
		t0=$(date +%s)
		log "$root: the package list changed; installing what is missing"
		refresh >&2
		sed -i "s/^deps=.*/deps=$want_hash/" "$stamp"
		log "$root updated in $(( $(date +%s) - t0 )) s"
	else
		log "reusing $root ($(sed -n 's/^built=//p' "$stamp"))"
	fi
	echo "$root"
	exit 0
fi

command -v mmdebstrap >/dev/null ||
	die "mmdebstrap not found: run contrib/install-deps.sh (or apt-get install mmdebstrap)"

t0=$(date +%s)
new=$root.new
log "making $root from $mirror $suite (mmdebstrap, a few minutes)"
rm -rf "$new" "$root"
hostname=squash-$suite
# - Check-Valid-Until: the archive's sid Release file may be past its date
#   (the option stays in the root's apt configuration);
# - policy-rc.d: packages must not start munged/slurmd/slurmctld in the root;
# - hostname and hosts: the root has none, and Slurm resolves its own name.
mmdebstrap --mode=root --variant=minbase \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--aptopt='APT::Install-Recommends "false"' \
	--essential-hook='printf "#!/bin/sh\nexit 101\n" >"$1/usr/sbin/policy-rc.d"; chmod 0755 "$1/usr/sbin/policy-rc.d"' \
	--include="$(paste -sd, <<<"$want")" \
	--customize-hook="echo $hostname >\"\$1/etc/hostname\"" \
	--customize-hook="printf '127.0.0.1\tlocalhost\n127.0.1.1\t$hostname\n::1\tlocalhost ip6-localhost ip6-loopback\n' >\"\$1/etc/hosts\"" \
	"$suite" "$new" "$mirror" >&2
printf 'suite=%s\nbuilt=%s from %s in %s s\ndeps=%s\n' "$suite" "$(date -u +%FT%TZ)" "$mirror" \
	"$(( $(date +%s) - t0 ))" "$want_hash" >"$new/etc/slurm-squash-root"
mv "$new" "$root"
log "made $root in $(( $(date +%s) - t0 )) s ($(du -sh "$root" | cut -f1))"
echo "$root"

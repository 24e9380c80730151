#!/usr/bin/env bash
# Makes (or reuses) the disk image of a Debian guest for tests/node/run.sh:
#
#   tests/node/build-guest.sh SUITE       e.g. bookworm (Slurm 22.05), trixie (24.11)
#
# The guest is $SQUASH_GUESTS_DIR/SUITE (default /var/cache/slurm-squash/guests,
# beside the matrix roots, shared by every checkout): disk.img (ext4, made
# with `mkfs.ext4 -d` from an mmdebstrap minbase tree), and the kernel and
# initrd taken from it (vmlinuz, initrd.img), for QEMU's -kernel/-initrd.
# It holds what a compute node of that release holds before slurm-squash is
# installed: systemd as PID 1, udev, dbus, the distribution's kernel, munge,
# slurmd, slurmctld, slurm-client, squashfs-tools, fuse3, squashfuse and
# the libraries the project's .deb depends on, so that `apt-get install
# ./slurm-squash_*.deb` works offline in the guest. Nothing of slurm-squash
# and no Slurm configuration is in it: the test run does that, as an admin
# would. A guest is complete once its stamp (stamp) exists and names the
# current package list and this script's hash; otherwise it is made again.
# Prints the guest's directory as its last line. Run as root.
set -euo pipefail

die() { echo "build-guest.sh: $*" >&2; exit 1; }
log() { echo "build-guest.sh: $*" >&2; }

[ $# = 1 ] || die "usage: $0 SUITE (bookworm, trixie, ...)"
suite=$1
case "$suite" in
'' | *[!a-z0-9-]*) die "bad suite name '$suite'" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root"

guests=${SQUASH_GUESTS_DIR:-/var/cache/slurm-squash/guests}
mirror=${SQUASH_ROOT_MIRROR:-http://deb.debian.org/debian}
dir=$guests/$suite
self=$(readlink -f "${BASH_SOURCE[0]}")

# What a node needs (systemd and the distribution's Slurm and FUSE), what
# the .deb depends on beyond those (libslurm-dev only pulls the libslurm of
# the release, whose name changes with it; libprotobuf-c1), and what the
# cases run (procps, iproute2, kmod for 9p and loop, util-linux's mount,
# losetup, findmnt, runuser).
packages=(
	systemd-sysv udev dbus kmod procps iproute2 linux-image-amd64 initramfs-tools
	slurmd slurmctld slurm-client munge libslurm-dev libprotobuf-c1
	squashfs-tools fuse3 squashfuse util-linux python3
)
want_hash=$( { printf '%s\n' "${packages[@]}"; cat "$self"; } | sha256sum | cut -c1-16)

mkdir -p "$guests"
# Two runs that want the same guest at once: the second waits.
exec {lock}>"$guests/.$suite.lock"
flock "$lock"

if [ -f "$dir/stamp" ] && [ "$(sed -n 's/^hash=//p' "$dir/stamp")" = "$want_hash" ]; then
	log "reusing $dir ($(sed -n 's/^built=//p' "$dir/stamp"))"
	echo "$dir"
	exit 0
fi
command -v mmdebstrap >/dev/null || die "mmdebstrap not found: run contrib/install-deps.sh"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 not found (e2fsprogs)"

t0=$(date +%s)
new=$dir.new
tree=$new/tree
rm -rf "$new" "$dir"
mkdir -p "$new"
trap 'rm -rf "$new"' EXIT
log "making $dir from $mirror $suite (mmdebstrap, about a minute)"

# The unit that runs the harness's script from the 9p share at every boot.
# Type=simple, not oneshot: the script waits for `systemctl
# is-system-running --wait`, which a oneshot still starting would block.
test_unit='[Unit]
Description=slurm-squash node test driver (tests/node)
RequiresMountsFor=/mnt/shared
ConditionPathExists=/mnt/shared/guest.sh
[Service]
Type=simple
ExecStart=/bin/bash /mnt/shared/guest.sh
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target'

# - policy-rc.d only while mmdebstrap runs (no daemons start in the tree);
# - hostname squash-node with an address of its own: Slurm cannot resolve
#   the node with loopback only (glibc's AI_ADDRCONFIG counts no
#   127.0.0.1), so lo also gets 127.0.1.1 (squash-node-addr.service); the
#   guest has no network card at all (-nic none);
# - serial-getty@ttyS0 masked: it hangs up the serial console the harness
#   reads;
# - slurmd and slurmctld disabled until the test configures them (as on a
#   node being set up): Debian 13's slurmd without slurm.conf retries a
#   configless fetch and holds the boot for its 90 s start timeout;
# - /mnt/shared: the harness's 9p share (files in, results out).
mmdebstrap --mode=root --variant=minbase \
	--aptopt='APT::Install-Recommends "false"' \
	--essential-hook='printf "#!/bin/sh\nexit 101\n" >"$1/usr/sbin/policy-rc.d"; chmod 0755 "$1/usr/sbin/policy-rc.d"' \
	--include="$(IFS=,; echo "${packages[*]}")" \
	--customize-hook='rm -f "$1/usr/sbin/policy-rc.d"' \
	--customize-hook='echo squash-node >"$1/etc/hostname"' \
	--customize-hook='printf "127.0.0.1\tlocalhost\n127.0.1.1\tsquash-node\n::1\tlocalhost ip6-localhost ip6-loopback\n" >"$1/etc/hosts"' \
	--customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\nshared /mnt/shared 9p trans=virtio,version=9p2000.L,msize=262144,nofail 0 0\n" >"$1/etc/fstab"; mkdir -p "$1/mnt/shared"' \
	--customize-hook='printf "[Unit]\nDescription=127.0.1.1 on lo (squash-node)\nAfter=network-pre.target\nBefore=network.target munge.service slurmd.service slurmctld.service\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/sbin/ip addr add 127.0.1.1/8 dev lo\n[Install]\nWantedBy=multi-user.target\n" >"$1/etc/systemd/system/squash-node-addr.service"' \
	--customize-hook="printf '%s\n' '$test_unit' >\"\$1/etc/systemd/system/squash-node-test.service\"" \
	--customize-hook='chroot "$1" systemctl enable squash-node-addr.service squash-node-test.service' \
	--customize-hook='chroot "$1" systemctl mask serial-getty@ttyS0.service' \
	--customize-hook='chroot "$1" systemctl disable slurmd.service slurmctld.service' \
	--customize-hook='chroot "$1" passwd -d root >/dev/null' \
	"$suite" "$tree" "$mirror" >&2

# Kernel and initrd for -kernel/-initrd (the guest has no boot loader).
kernel=$(ls "$tree"/boot/vmlinuz-* | sort -V | tail -n 1)
initrd=$(ls "$tree"/boot/initrd.img-* | sort -V | tail -n 1)
[ -f "$kernel" ] && [ -f "$initrd" ] || die "no kernel or initrd in $tree/boot"
cp "$kernel" "$new/vmlinuz"
cp "$initrd" "$new/initrd.img"
# The tree plus 1 GiB for the .deb, the images and the journal.
size_mb=$(( $(du -sm "$tree" | cut -f1) + 1024 ))
mkfs.ext4 -q -F -L squash-node -d "$tree" "$new/disk.img" "${size_mb}M"
rm -rf "$tree"
printf 'suite=%s\nbuilt=%s from %s in %s s, kernel %s\nhash=%s\n' "$suite" "$(date -u +%FT%TZ)" "$mirror" \
	"$(( $(date +%s) - t0 ))" "$(basename "$kernel")" "$want_hash" >"$new/stamp"
mv "$new" "$dir"
trap - EXIT
log "made $dir in $(( $(date +%s) - t0 )) s ($(du -sh "$dir" | cut -f1))"
echo "$dir"

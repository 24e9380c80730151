#!/usr/bin/env bash
# squash-pack --profile CMD (contrib/squash-pack, squash-pack(1) START
# PROFILES): the files CMD read, and which bytes, are in the image's
# /.squash/start-profile in the order read; the first of them comes first in
# the image (right after the superblock); the image still holds the tree
# and its metadata; a command that reads nothing is an error and writes no
# image; a failing command is a warning; bundles refuse it; the command
# runs at the target (relocated paths lead into the image), or with a
# warning at the temporary mount point when the target's parent is missing;
# nothing stays mounted and no temporary directory is left, a reader that
# cannot mount included. Needs mksquashfs, unsquashfs,
# python3,
# the built squash-reader and a FUSE mount (root here; skipped, exit 77,
# without them); run by make check.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pack=$here/../../contrib/squash-pack
export SQUASH_READER=${SQUASH_READER:-$PWD/../daemon/reader/squash-reader}
for t in mksquashfs unsquashfs python3; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
[ -x "$SQUASH_READER" ] || { echo "SKIP: no squash-reader at $SQUASH_READER"; exit 77; }
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || { echo "SKIP: needs root and /dev/fuse to mount"; exit 77; }
unset SOURCE_DATE_EPOCH

tmp=$(mktemp -d)
export TMPDIR=$tmp/tmpdir
mkdir "$TMPDIR"
trap 'grep -o " $tmp[^ ]*" /proc/self/mountinfo | while read -r m; do umount -l "$m"; done; rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

src=$tmp/stack
mkdir -p "$src/lib" "$src/bin" "$src/share"
head -c 1048576 /dev/urandom >"$src/lib/libwanted.so"   # incompressible: stored as it is
head -c 1048576 /dev/urandom >"$src/bin/aaa-unread.dat" # before lib/ in directory order
for i in 1 2 3; do echo "print($i)" >"$src/lib/mod$i.py"; done
printf '#!/bin/sh\necho tool\n' >"$src/bin/tool"
chmod -R a+rX "$src"

pk() { "$pack" -q "$@" >"$tmp/out" 2>&1; rc=$?; }
left_behind() {
	grep -q " $tmp" /proc/self/mountinfo && fail "$1: a mount is left: $(grep " $tmp" /proc/self/mountinfo)"
	[ -z "$(ls -A "$TMPDIR")" ] || fail "$1: left in TMPDIR: $(ls -A "$TMPDIR")"
	ls -a "$tmp/out1" | grep >/dev/null '\.tmp$' && fail "$1: a temporary image is left: $(ls -a "$tmp/out1")"
}

# --- a start that reads the middle of a library and two modules
mkdir "$tmp/out1"
img=$tmp/out1/stack.sqfs
pk "$src" "$img" --profile 'cat lib/mod2.py >/dev/null; dd if=$SQUASH_PROFILE_ROOT/lib/libwanted.so bs=4096 skip=2 count=4 status=none >/dev/null; cat lib/mod1.py >/dev/null'
[ "$rc" = 0 ] || fail "pack with a profile: exit $rc: $(cat "$tmp/out")"
unsquashfs -cat "$img" .squash/start-profile >"$tmp/profile" 2>"$tmp/err" || fail "no /.squash/start-profile: $(cat "$tmp/err")"
head -n 1 "$tmp/profile" | grep -x >/dev/null '# squash start profile 1' || fail "profile header: $(head -n 1 "$tmp/profile")"
# The order first read; the library's range covers what dd read (the
# kernel reads ahead of it, so it may be more, never less).
order=$(tail -n +2 "$tmp/profile" | awk '{ print $3 }' | tr '\n' ' ')
[ "$order" = "lib/mod2.py lib/libwanted.so lib/mod1.py " ] || fail "profile order: '$order'"
read -r from to _ < <(grep ' lib/libwanted.so$' "$tmp/profile")
[ "${from:-1}" -le 8192 ] && [ "${to:-0}" -ge 24576 ] || fail "library range $from-$to does not cover 8192-24576"
grep -q 'aaa-unread' "$tmp/profile" && fail "a file not read is in the profile"
unsquashfs -cat "$img" .squash/meta | grep >/dev/null '^format 1' || fail "the metadata is missing"
# The library's data right after the superblock (96 bytes and the
# compressor's options): it was read before the file first in directory
# order, and the modules are in fragments, written later.
at=$(python3 -c 'import sys; i = open(sys.argv[1], "rb").read(); print(i.find(open(sys.argv[2], "rb").read(4096)))' "$img" "$src/lib/libwanted.so")
[ "$at" -ge 96 ] && [ "$at" -lt 256 ] || fail "the profile's first data file is not first in the image (at $at)"
unsquashfs -q -d "$tmp/unpacked" "$img" >/dev/null 2>&1 || fail "unsquashfs"
diff -r -x .squash "$src" "$tmp/unpacked" >/dev/null || fail "the image does not hold the tree: $(diff -r -x .squash "$src" "$tmp/unpacked" | head -n 3)"
left_behind "pack with a profile"

# --- a command that fails still records (a warning); one that reads nothing is an error
pk "$src" "$img" -f --profile 'cat lib/mod3.py >/dev/null; exit 3'
[ "$rc" = 0 ] || fail "a failing profile command: exit $rc: $(cat "$tmp/out")"
unsquashfs -cat "$img" .squash/start-profile | grep >/dev/null ' lib/mod3.py$' || fail "a failing command's reads are not recorded"
"$pack" "$src" "$img" -f --profile 'cat lib/mod3.py >/dev/null; exit 3' >"$tmp/out" 2>&1
grep -q 'warning: the profile command exited 3' "$tmp/out" || fail "no warning for a failing profile command"
rm -f "$img"
pk "$src" "$img" --profile 'true'
[ "$rc" = 1 ] && grep -q 'error: --profile: the command read no file' "$tmp/out" || fail "a command reading nothing: exit $rc: $(cat "$tmp/out")"
[ -e "$img" ] && fail "an image was written for a profile that read nothing"
left_behind "profile reading nothing"

# --- with --no-meta the profile is still stored; bundles refuse it
pk "$src" "$img" --no-meta --profile 'cat lib/mod1.py'
[ "$rc" = 0 ] || fail "--no-meta with a profile: exit $rc: $(cat "$tmp/out")"
unsquashfs -cat "$img" .squash/start-profile | grep >/dev/null ' lib/mod1.py$' || fail "--no-meta: no profile"
unsquashfs -cat "$img" .squash/meta >/dev/null 2>&1 && [ -n "$(unsquashfs -cat "$img" .squash/meta 2>/dev/null)" ] && fail "--no-meta wrote metadata"
pk "$src" "$tmp/bundles" --bundle-files 2 --profile 'true'
[ "$rc" = 1 ] && grep -q 'error: --profile is for single images' "$tmp/out" || fail "bundles with --profile: exit $rc: $(cat "$tmp/out")"
left_behind "no-meta and bundles"

# --- the command runs at the target, where relocation points: a script
# naming its own tree by the path it was built at reads that file through
# the target (rewritten there), in a mount namespace of its own
at=$tmp/at
mkdir -p "$tmp/rel/bin" "$tmp/rel/data" "$at/existing"
echo payload >"$tmp/rel/data/x.txt"
printf '#!/bin/sh\ncat %s/data/x.txt\n' "$tmp/rel" >"$tmp/rel/bin/hello"
chmod -R a+rX "$tmp/rel" && chmod a+x "$tmp/rel/bin/hello"
for target in "$at/stack" "$at/existing"; do
	pk "$tmp/rel" "$img" -f --target "$target" --profile '$SQUASH_PROFILE_ROOT/bin/hello >&2'
	[ "$rc" = 0 ] || fail "profile at $target: exit $rc: $(cat "$tmp/out")"
	grep -qx payload "$tmp/out" || fail "profile at $target: the script did not read its file through the target: $(cat "$tmp/out")"
	order=$(unsquashfs -cat "$img" .squash/start-profile | tail -n +2 | awk '{ print $3 }' | tr '\n' ' ')
	[ "$order" = "bin/hello data/x.txt " ] || fail "profile at $target: recorded '$order'"
	left_behind "profile at $target"
done
[ "$(ls -A "$at")" = existing ] && [ -z "$(ls -A "$at/existing")" ] || fail "the target's parent changed: $(ls -AR "$at")"
# No parent: a warning, and the command runs at the temporary mount point.
"$pack" "$tmp/rel" "$img" -f --target /nonexistent-$$/stack --profile 'cat data/x.txt >/dev/null; $SQUASH_PROFILE_ROOT/bin/hello' >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 0 ] || fail "profile without the target's parent: exit $rc: $(cat "$tmp/out")"
grep -q "warning: --profile: cannot run the command at the target /nonexistent-$$/stack (/nonexistent-$$ does not exist here)" "$tmp/out" ||
	fail "no warning without the target's parent: $(cat "$tmp/out")"
left_behind "profile without the target's parent"
# As a user (their own user namespace), where /dev/fuse lets users mount
# (Debian: 0666; this test's host may keep it 0600).
if [ -r /dev/fuse ] && [ -w /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" = 666 ] && id nobody >/dev/null 2>&1; then
	mkdir -m 0777 "$tmp/user" "$tmp/user/tmp" && mkdir "$at/user"
	chmod 0755 "$tmp" "$at"
	out=$(setpriv --reuid nobody --regid nogroup --clear-groups env TMPDIR="$tmp/user/tmp" SQUASH_READER="$SQUASH_READER" \
		"$pack" -q "$tmp/rel" "$tmp/user/img.sqfs" --target "$at/user/stack" --profile '$SQUASH_PROFILE_ROOT/bin/hello; id -u' 2>&1)
	[ "$(unsquashfs -cat "$tmp/user/img.sqfs" .squash/start-profile 2>&1 | tail -n +2 | awk '{ print $3 }' | tr '\n' ' ')" = "bin/hello data/x.txt " ] ||
		fail "profile at the target as a user: $out"
	grep -qx "$(id -u nobody)" <<<"$out" || fail "the command did not run as the user: $out"
	[ -z "$(ls -A "$tmp/user/tmp")" ] || fail "a user's profile left: $(ls -A "$tmp/user/tmp")"
else
	echo "(as a user: skipped, /dev/fuse is $(stat -c %a /dev/fuse 2>/dev/null || echo missing) here)"
fi

# --- a reader that cannot mount: an error, and nothing left behind
SQUASH_READER=/bin/false pk "$src" "$img" -f --profile 'cat lib/mod1.py'
[ "$rc" = 1 ] && grep -q 'error: --profile: squash-reader could not mount the image' "$tmp/out" ||
	fail "a reader that cannot mount: exit $rc: $(cat "$tmp/out")"
left_behind "a reader that cannot mount"

[ "$failures" = 0 ] && echo "squash-pack --profile: all checks passed"
[ "$failures" = 0 ]

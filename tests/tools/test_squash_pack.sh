#!/usr/bin/env bash
# contrib/squash-pack: the images it makes (read back with unsquashfs), what
# it refuses, and its Lustre handling. Needs mksquashfs and unsquashfs
# (skipped, exit 77, without them); a few seconds; run by make check.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pack=$here/../../contrib/squash-pack
for t in mksquashfs unsquashfs; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# A small software-like tree, readable by everyone.
src=$tmp/stack
mkdir -p "$src/lib/pkg" "$src/bin"
echo 'print("hello from the image")' >"$src/lib/pkg/hello.py"
printf '#!/bin/sh\necho tool\n' >"$src/bin/tool"
head -c 300000 /dev/urandom >"$src/lib/pkg/blob.bin"
chmod -R a+rX "$src"
chmod 755 "$src/bin/tool"

# Runs squash-pack; stdout+stderr in $tmp/out, status in $rc.
pk() { "$pack" "$@" >"$tmp/out" 2>&1; rc=$?; }
expect_ok() { [ "$rc" = 0 ] || fail "$1: exit $rc: $(cat "$tmp/out")"; }
expect_error() { # message-regex what
	[ "$rc" = 1 ] || fail "$2: exit $rc, expected 1"
	grep -Eq "^squash-pack: error: .*$1" "$tmp/out" || fail "$2: no error matching '$1': $(cat "$tmp/out")"
}
super() { unsquashfs -s "$1" 2>&1; }

# --- defaults: zstd, 128K blocks, root owners, no xattrs; choices explained
img=$tmp/out1/stack.sqfs
mkdir "$tmp/out1"
pk "$src" "$img"
expect_ok "default pack"
super "$img" | grep -q '^Compression zstd' || fail "default compression is not zstd: $(super "$img")"
super "$img" | grep -q '^Block size 131072' || fail "default block size is not 128K: $(super "$img")"
super "$img" | grep -q '^Xattrs are not stored' || fail "default image stores xattrs: $(super "$img")"
for what in 'compression: zstd' 'block size: 128K' 'owners: root' 'extended attributes: dropped' \
	'layout: .* is not on Lustre' 'wrote .*stack.sqfs'; do
	grep -Eq "^squash-pack: $what" "$tmp/out" || fail "output does not say '$what': $(cat "$tmp/out")"
done
listing=$(unsquashfs -lln "$img")
echo "$listing" | grep -v ' 0/0 ' | grep -q squashfs-root && fail "not every file is root-owned: $listing"
echo "$listing" | grep -Eq '^-rwxr-xr-x .*squashfs-root/bin/tool$' || fail "modes not kept: $listing"
[ "$(unsquashfs -cat "$img" lib/pkg/hello.py)" = 'print("hello from the image")' ] ||
	fail "content differs"
unsquashfs -cat "$img" lib/pkg/blob.bin | cmp -s - "$src/lib/pkg/blob.bin" || fail "blob differs"
ls -A "$tmp/out1" | grep -v '^stack.sqfs$' && fail "left temporary files: $(ls -A "$tmp/out1")"

# --- an existing image is kept unless --force, and replaced whole with it
sum=$(md5sum <"$img")
pk -c lz4 "$src" "$img"
expect_error 'exists: use --force' "existing output"
[ "$(md5sum <"$img")" = "$sum" ] || fail "existing image changed without --force"
pk --force -c lz4 -b 1M "$src" "$img"
expect_ok "--force"
super "$img" | grep -q '^Compression lz4' || fail "--force -c lz4 did not write lz4"
super "$img" | grep -q '^Block size 1048576' || fail "-b 1M not used"
grep -q 'block size: 1M (as asked' "$tmp/out" || fail "non-default block size not reported"

# --- owners kept on request
if [ "$(id -u)" = 0 ]; then
	chown -R 4242:4343 "$src/lib"
	want='4242/4343'
else
	want="$(id -u)/$(id -g)"
fi
pk --keep-owners --keep-xattrs "$src" "$tmp/owners.sqfs"
expect_ok "--keep-owners"
unsquashfs -lln "$tmp/owners.sqfs" | grep -q " $want .*squashfs-root/lib/pkg/hello.py" ||
	fail "--keep-owners lost the owner $want: $(unsquashfs -lln "$tmp/owners.sqfs")"
grep -q 'owners: kept' "$tmp/out" || fail "--keep-owners not reported"
[ "$(id -u)" = 0 ] && chown -R 0:0 "$src/lib"

# --- a file only its owner can read would be unreadable once root-owned
chmod 600 "$src/lib/pkg/hello.py"
pk "$src" "$tmp/private.sqfs"
expect_error 'hello.py is not readable by everyone.*chmod -R a\+rX' "private file"
[ -e "$tmp/private.sqfs" ] && fail "an image was written despite the private file"
chmod 644 "$src/lib/pkg/hello.py"

# --- error paths
pk "$tmp/missing" "$tmp/x.sqfs"
expect_error 'missing does not exist' "missing directory"
pk "$src/lib/pkg/hello.py" "$tmp/x.sqfs"
expect_error 'is not a directory' "file as directory"
pk "$src" "$tmp/nodir/x.sqfs"
expect_error 'directory .*nodir does not exist' "missing output directory"
pk "$src" "$src/lib/self.sqfs"
expect_error 'inside' "image inside the tree"
pk "$src" "$tmp/out1"
expect_error 'is a directory' "directory as image"
pk -c brotli "$src" "$tmp/x.sqfs"
expect_error "unknown compression 'brotli'" "unknown compression"
pk -b 100K "$src" "$tmp/x.sqfs"
expect_error 'power of two' "bad block size"
pk -c lz4 -l 3 "$src" "$tmp/x.sqfs"
expect_error 'lz4 takes no --level' "level for lz4"
pk "$src"
[ "$rc" = 2 ] || fail "one argument: exit $rc, expected 2 (usage)"
pk -n "$src" "$tmp/dry.sqfs"
expect_ok "dry run"
[ -e "$tmp/dry.sqfs" ] && fail "--dry-run wrote the image"
grep -q 'would run: mksquashfs' "$tmp/out" || fail "--dry-run did not show the command"
[ -e "$tmp/x.sqfs" ] && fail "a refused run left $tmp/x.sqfs"

# --- Lustre: the layout is set on the new file before mksquashfs writes it.
# Lustre is not available here: SQUASH_PACK_FSTYPE stands in for stat -f,
# and an lfs that records its arguments and creates the file as lfs does.
mkdir "$tmp/fakebin" "$tmp/lus"
cat >"$tmp/fakebin/lfs" <<EOF
#!/bin/sh
echo "\$*" >>"$tmp/lfs.calls"
for last; do :; done
: >"\$last"
EOF
chmod 755 "$tmp/fakebin/lfs"
PATH=$tmp/fakebin:$PATH SQUASH_PACK_FSTYPE=lustre pk "$src" "$tmp/lus/stack.sqfs"
expect_ok "pack on Lustre"
grep -Eq '^setstripe -c -1 -- .*/lus/\.stack\.sqfs\.[0-9]+\.[0-9]+\.tmp$' "$tmp/lfs.calls" ||
	fail "lfs setstripe not called on the new file: $(cat "$tmp/lfs.calls" 2>&1)"
grep -q 'layout: Lustre, stripe count -1' "$tmp/out" || fail "Lustre layout not reported"
super "$tmp/lus/stack.sqfs" | grep -q '^Compression zstd' || fail "no image written on Lustre"
rm -f "$tmp/lfs.calls"
PATH=$tmp/fakebin:$PATH SQUASH_PACK_FSTYPE=lustre pk --stripe-count 8 -f "$src" "$tmp/lus/stack.sqfs"
grep -q '^setstripe -c 8 -- ' "$tmp/lfs.calls" || fail "--stripe-count 8 not passed to lfs"
rm -f "$tmp/lfs.calls"
PATH=$tmp/fakebin:$PATH SQUASH_PACK_FSTYPE=lustre pk --no-stripe -f "$src" "$tmp/lus/stack.sqfs"
[ -e "$tmp/lfs.calls" ] && fail "--no-stripe still called lfs"
if ! command -v lfs >/dev/null; then
	SQUASH_PACK_FSTYPE=lustre pk -f "$src" "$tmp/lus/stack.sqfs"
	expect_ok "Lustre without lfs"
	grep -q 'on Lustre, but lfs is not installed' "$tmp/out" || fail "missing lfs not reported"
fi

if [ "$failures" -gt 0 ]; then
	echo "$failures check(s) failed" >&2
	exit 1
fi
echo "squash-pack: all checks passed"

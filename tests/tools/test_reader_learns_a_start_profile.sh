#!/usr/bin/env bash
# squash-reader --profile-cache TEMPLATE (squash-reader(8), LEARNED START
# PROFILES): the first mount of an image without a start profile writes
# the files it read to DIR/KEY (KEY: FNV-1a of the superblock and the
# image's size), 0600 in a directory made 0700; the next mount uses it
# (its stderr says so, and it walks the files through the mount); a garbage file, a symbolic link and a file over
# the size bound at KEY are passed over (and replaced) without failing the
# mount; a directory that cannot be made costs the profile, not the
# mount; a bad template is refused; an image with its own profile never
# reads or writes the cache; a use touches the profile, and a write
# prunes the directory to the user's 256 most recently used. Needs mksquashfs, python3, the built
# squash-reader and a FUSE mount (root here; skipped, exit 77, without
# them); run by make check.
set -uo pipefail

reader=${SQUASH_READER:-$PWD/../daemon/reader/squash-reader}
for t in mksquashfs python3 fusermount3; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
[ -x "$reader" ] || { echo "SKIP: no squash-reader at $reader"; exit 77; }
[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || { echo "SKIP: needs root and /dev/fuse to mount"; exit 77; }

tmp=$(mktemp -d)
pid=
cleanup() {
	grep -o " $tmp[^ ]*" /proc/self/mountinfo | while read -r m; do
		fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"
	done
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# Several files in a few directories; the two read are not neighbours in
# the inode table (a READ of the next file's neighbour would store it too,
# and the profile would rightly list it).
src=$tmp/src
mkdir -p "$src/a" "$src/b" "$src/c" "$tmp/mnt"
for d in a b c; do for i in 1 2 3; do echo "file $d$i" >"$src/$d/f$i.txt"; done; done
mksquashfs "$src" "$tmp/img.sqfs" -quiet -noappend >/dev/null || { echo "FAIL: mksquashfs"; exit 1; }

key_of() {
	python3 -c 'import os, struct, sys
b = open(sys.argv[1], "rb").read(96) + struct.pack("<Q", os.path.getsize(sys.argv[1]))
h = 14695981039346656037
for c in b:
    h = ((h ^ c) * 1099511628211) & (2**64 - 1)
print("%016x" % h)' "$1"
}

# mount_read TEMPLATE IMAGE FILE...: mounts, reads the files (checked
# against $from, the image's tree),
# unmounts and waits for the reader; its stderr in $tmp/err.
mount_read() {
	local tmpl=$1 img=$2
	shift 2
	"$reader" ${debug:+-d} --profile-cache "$tmpl" "$img" "$tmp/mnt" 2>"$tmp/err" &
	pid=$!
	for _ in $(seq 100); do mountpoint -q "$tmp/mnt" && break; sleep 0.05; done
	mountpoint -q "$tmp/mnt" || { fail "no mount: $(cat "$tmp/err")"; kill "$pid"; wait "$pid"; pid=; return; }
	# With -d: until the reader's walk read its profile's 2 files through
	# the mount (FUSE's debug lines; this shell reads nothing).
	for _ in $(seq 60); do
		[ -z "${debug:-}" ] || [ "$(grep -c 'opcode: READ (15)' "$tmp/err")" -ge 2 ] && break
		sleep 0.05
	done
	for f in "$@"; do
		[ "$(cat "$tmp/mnt/$f")" = "$(cat "$from/$f")" ] || fail "$f read wrong through the mount"
	done
	fusermount3 -u "$tmp/mnt" || fail "unmount"
	wait "$pid" || fail "the reader exited $?: $(cat "$tmp/err")"
	pid=
}

key=$(key_of "$tmp/img.sqfs")
from=$src
dir=$tmp/cache/0/profiles # %U of root
tmpl="$tmp/cache/%U/profiles"

# --- learning: exactly the files read, in the order read
mount_read "$tmpl" "$tmp/img.sqfs" c/f3.txt a/f2.txt
[ -f "$dir/$key" ] || fail "nothing learned at $dir/$key: $(cat "$tmp/err"); $(ls -laR "$tmp/cache" 2>&1)"
[ "$(stat -c %a "$dir/$key" 2>/dev/null)" = 600 ] || fail "the profile's mode: $(stat -c %a "$dir/$key" 2>&1)"
[ "$(stat -c %a "$dir" 2>/dev/null)" = 700 ] || fail "the directory's mode: $(stat -c %a "$dir" 2>&1)"
[ "$(stat -c %a "$tmp/cache/0" 2>/dev/null)" = 700 ] || fail "the directory made above it: $(stat -c %a "$tmp/cache/0" 2>&1)"
head -n 1 "$dir/$key" 2>/dev/null | grep -x >/dev/null '# squash start profile 1' || fail "no header: $(cat "$dir/$key" 2>&1)"
listed=$(tail -n +2 "$dir/$key" 2>/dev/null | awk '{ print $3 }' | tr '\n' ' ')
[ "$listed" = "c/f3.txt a/f2.txt " ] || fail "learned '$listed', not 'c/f3.txt a/f2.txt '"
[ "$(ls -A "$dir")" = "$key" ] || fail "more in the directory: $(ls -A "$dir")"
grep -q "start profile learned into $dir/$key: 2 files" "$tmp/err" || fail "no word of the learning: $(cat "$tmp/err")"

# --- the next mount uses it (and writes nothing): says so, and walks it
# (its two files read through the mount by the reader itself, section 29
# of docs/performance.md)
cp -p "$dir/$key" "$tmp/learned"
debug=1 mount_read "$tmpl" "$tmp/img.sqfs"
grep -qx "squash-reader: start profile learned from $dir/$key: 2 files" "$tmp/err" || fail "the learned profile was not used: $(cat "$tmp/err")"
reads=$(grep 'opcode: READ (15)' "$tmp/err" | grep -o 'nodeid: [0-9]*' | sort -u | wc -l)
[ "$reads" = 2 ] || fail "the learned profile's 2 files were not walked: $reads read"
cmp -s "$dir/$key" "$tmp/learned" || fail "a mount with a learned profile rewrote it"

# --- passed over, the mount served, and learned again over it
passed_over() { # what, the reason the reader gives
	mount_read "$tmpl" "$tmp/img.sqfs" b/f2.txt
	grep -q "learned from" "$tmp/err" && fail "$1 was used: $(cat "$tmp/err")"
	grep -q "ignoring $dir/$key: $2" "$tmp/err" || fail "$1: no word of it: $(cat "$tmp/err")"
	[ -f "$dir/$key" ] && [ ! -L "$dir/$key" ] && tail -n +2 "$dir/$key" | grep >/dev/null ' b/f2.txt$' ||
		fail "$1: not learned over: $(ls -la "$dir"; cat "$dir/$key")"
}
head -c 3000 /dev/urandom >"$dir/$key"
passed_over "a garbage file" "not a start profile"
printf '# squash start profile 1\n0 10 a/f1.txt\n' >"$tmp/elsewhere"
rm -f "$dir/$key" && ln -s "$tmp/elsewhere" "$dir/$key"
passed_over "a symbolic link" "a symbolic link"
[ "$(cat "$tmp/elsewhere")" = "$(printf '# squash start profile 1\n0 10 a/f1.txt')" ] || fail "the link's target changed"
{ echo '# squash start profile 1'; head -c 4194304 /dev/zero | tr '\0' '#'; echo; } >"$dir/$key"
passed_over "a file over 4 MiB" "larger than a profile may be"

# --- a use touches the profile (its mtime is its last use)
touch -d '2 days ago' "$dir/$key"
mount_read "$tmpl" "$tmp/img.sqfs"
grep -q "learned from $dir/$key" "$tmp/err" || fail "not used: $(cat "$tmp/err")"
[ $(($(date +%s) - $(stat -c %Y "$dir/$key"))) -lt 3600 ] || fail "a use did not touch the profile: $(stat -c %y "$dir/$key")"

# --- pruned at a write: the user's 256 most recently used profiles kept,
# those unused for 90 days and temporary files of dead writes over an hour
# old removed; other names and other users' files left alone
rm -f "$dir/$key"
for i in $(seq 1 300); do
	f=$dir/$(printf '%016x' "$i")
	echo '# squash start profile 1' >"$f"
	touch -d "@$(($(date +%s) - 86400 - i * 60))" "$f" # 1: the most recent
done
touch -d '91 days ago' "$dir/$(printf '%016x' 5)"
echo x >"$dir/.0123456789abcdef.77.0000abcd.tmp" && touch -d '2 hours ago' "$dir/.0123456789abcdef.77.0000abcd.tmp"
echo x >"$dir/.fedcba9876543210.78.0000abcd.tmp" # a write under way
echo x >"$dir/notes.txt" && touch -d '200 days ago' "$dir/notes.txt"
echo x >"$dir/ffffffffffffff00" && touch -d '200 days ago' "$dir/ffffffffffffff00" && chown 65534 "$dir/ffffffffffffff00" # another user's
mount_read "$tmpl" "$tmp/img.sqfs" a/f1.txt
grep -q "start profile learned into $dir/$key" "$tmp/err" || fail "not learned among 300: $(cat "$tmp/err")"
grep -q "start profile cache $dir: 46 old files removed" "$tmp/err" || fail "no word of the pruning: $(cat "$tmp/err")"
mine=$(find "$dir" -maxdepth 1 -user 0 -name '????????????????' | wc -l)
[ "$mine" = 256 ] || fail "$mine profiles of the user kept, not 256"
[ -f "$dir/$key" ] || fail "the profile just learned was removed"
[ -f "$dir/$(printf '%016x' 1)" ] && [ -f "$dir/$(printf '%016x' 256)" ] || fail "a recently used profile was removed"
[ -e "$dir/$(printf '%016x' 5)" ] && fail "a profile unused for 91 days was kept"
[ -e "$dir/$(printf '%016x' 257)" ] && fail "the 256 most recent were not what was kept"
[ -e "$dir/.0123456789abcdef.77.0000abcd.tmp" ] && fail "a dead write's temporary file was kept"
[ -f "$dir/.fedcba9876543210.78.0000abcd.tmp" ] && [ -f "$dir/notes.txt" ] && [ -f "$dir/ffffffffffffff00" ] ||
	fail "a file that is not the user's old profile was removed: $(ls -A "$dir" | grep -v '^0000000000000[0-9a-f]*$')"
find "$dir" -mindepth 1 ! -name "$key" -delete

# --- a directory that cannot be made: said once, the mount served
echo file >"$tmp/afile"
mount_read "$tmp/afile/profiles" "$tmp/img.sqfs" a/f1.txt
grep -q "start profile cache: $tmp/afile/profiles/$key: cannot make the directory" "$tmp/err" ||
	fail "no word of a directory that cannot be made: $(cat "$tmp/err")"

# --- a bad template is refused
for bad in "$tmp/%x" "relative/%U" "$tmp/100%"; do
	"$reader" --profile-cache "$bad" "$tmp/img.sqfs" "$tmp/mnt" 2>"$tmp/err"
	rc=$?
	[ "$rc" = 2 ] && grep -q "is not a path template" "$tmp/err" || fail "template $bad: exit $rc: $(cat "$tmp/err")"
done

# --- an image with its own profile: the cache neither read nor written
src2=$tmp/src2
mkdir -p "$src2/.squash" "$src2/a"
echo one >"$src2/a/f1.txt" && echo two >"$src2/a/f2.txt"
printf '# squash start profile 1\n0 4 a/f1.txt\n' >"$src2/.squash/start-profile"
mksquashfs "$src2" "$tmp/own.sqfs" -quiet -noappend >/dev/null || fail "mksquashfs of the profiled image"
key2=$(key_of "$tmp/own.sqfs")
mkdir -p "$tmp/own/dir"
from=$src2
printf '# squash start profile 1\n0 4 a/f2.txt\n' >"$tmp/own/dir/$key2"
mount_read "$tmp/own/dir" "$tmp/own.sqfs" a/f2.txt
grep -q "learned" "$tmp/err" && fail "an image with its own profile used the cache: $(cat "$tmp/err")"
[ "$(ls -A "$tmp/own/dir")" = "$key2" ] && [ "$(tail -n 1 "$tmp/own/dir/$key2")" = "0 4 a/f2.txt" ] ||
	fail "an image with its own profile wrote to the cache: $(ls -A "$tmp/own/dir")"
mount_read "$tmp/own/new" "$tmp/own.sqfs" a/f2.txt
[ -e "$tmp/own/new" ] && fail "an image with its own profile made the cache directory"

[ "$failures" = 0 ] && echo "squash-reader --profile-cache: all checks passed"
[ "$failures" = 0 ]

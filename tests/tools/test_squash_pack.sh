#!/usr/bin/env bash
# contrib/squash-pack: the images and bundles it makes (read back with
# unsquashfs), what it refuses, and its Lustre handling. Needs mksquashfs and unsquashfs
# (skipped, exit 77, without them); a few seconds; run by make check.
set -uo pipefail
# No `| grep -q` here: with pipefail, grep -q leaving at its first match
# can fail the writer of a later line with SIGPIPE, and the check with it
# (seen once on sid: "metadata has no line '^format 1$'" above that line).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pack=$here/../../contrib/squash-pack
for t in mksquashfs unsquashfs; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done

# squash-pack and mksquashfs take SOURCE_DATE_EPOCH as every bundle's
# creation time (and lower later file times to it); dpkg-buildpackage
# exports it from debian/changelog when the .deb is built with its checks.
# The checks below of the default (each bundle's newest file's time) need it
# unset; the one of SOURCE_DATE_EPOCH sets it itself.
unset SOURCE_DATE_EPOCH

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
expect_usage_error() { # message-regex what: wrong usage exits 2
	[ "$rc" = 2 ] || fail "$2: exit $rc, expected 2"
	grep -Eq "^squash-pack: error: .*$1" "$tmp/out" || fail "$2: no error matching '$1': $(cat "$tmp/out")"
}
super() { unsquashfs -s "$1" 2>&1; }

# --- defaults: zstd, 128K blocks, root owners, no xattrs; choices explained
img=$tmp/out1/stack.sqfs
mkdir "$tmp/out1"
pk "$src" "$img"
expect_ok "default pack"
super "$img" | grep >/dev/null '^Compression zstd' || fail "default compression is not zstd: $(super "$img")"
super "$img" | grep >/dev/null '^Block size 131072' || fail "default block size is not 128K: $(super "$img")"
super "$img" | grep >/dev/null '^Xattrs are not stored' || fail "default image stores xattrs: $(super "$img")"
for what in 'compression: zstd' 'block size: 128K' 'owners: root' 'extended attributes: dropped' \
	'layout: .* is not on Lustre' 'wrote .*stack.sqfs'; do
	grep -Eq "^squash-pack: $what" "$tmp/out" || fail "output does not say '$what': $(cat "$tmp/out")"
done
listing=$(unsquashfs -lln "$img")
echo "$listing" | grep -v ' 0/0 ' | grep >/dev/null squashfs-root && fail "not every file is root-owned: $listing"
echo "$listing" | grep -E >/dev/null '^-rwxr-xr-x .*squashfs-root/bin/tool$' || fail "modes not kept: $listing"
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
super "$img" | grep >/dev/null '^Compression lz4' || fail "--force -c lz4 did not write lz4"
super "$img" | grep >/dev/null '^Block size 1048576' || fail "-b 1M not used"
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
unsquashfs -lln "$tmp/owners.sqfs" | grep >/dev/null " $want .*squashfs-root/lib/pkg/hello.py" ||
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
super "$tmp/lus/stack.sqfs" | grep >/dev/null '^Compression zstd' || fail "no image written on Lustre"
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

# --- metadata: /.squash/meta in every image, DIR untouched
meta() { unsquashfs -cat "$1" .squash/meta 2>&1; }
m=$(meta "$img")
version=$(sed -n 's/^AC_INIT(\[slurm-squash\], \[\([^]]*\)\].*/\1/p' "$here/../../configure.ac")
for want in '^format 1$' '^name stack$' '^created 20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$' \
	"^created-by $(id -un)\$" "^source $(realpath "$src")\$" "^packer squash-pack $version\$" \
	'^target /squash/stack$' '^default-env default$' '^env default prepend-path PATH bin$'; do
	echo "$m" | grep -E >/dev/null "$want" || fail "metadata has no line '$want': $m"
done
echo "$m" | grep -E >/dev/null '^(version|description) ' && fail "metadata names a version or description not asked for: $m"
unsquashfs -lln "$img" | grep -E >/dev/null '^drwxr-xr-x 0/0 .*squashfs-root/\.squash$' ||
	fail "/.squash is not a root directory of mode 755: $(unsquashfs -lln "$img")"
[ -e "$src/.squash" ] && fail "the metadata was written into DIR"
# What DIR holds gives the default environment: a venv and conda prefix.
mkdir -p "$tmp/venv/bin" "$tmp/venv/conda-meta" "$tmp/venv/share/man/man1" "$tmp/venv/lib/pkgconfig"
echo 'home = /usr/bin' >"$tmp/venv/pyvenv.cfg"
chmod -R a+rX "$tmp/venv"
pk --name py-tools --version 1.2.0 --description '  Python tools: lint and format  ' --target /squash/pyt \
	--env default:prepend-path:PYTHONPATH=lib/py --env 'gpu:set:OMP_NUM_THREADS=8 4' \
	--env gpu:append-path:LD_LIBRARY_PATH=. "$tmp/venv" "$tmp/venv.sqfs"
expect_ok "metadata options"
want=$(printf '%s\n' 'default-env default' 'env default prepend-path PATH bin' 'env default set-path VIRTUAL_ENV .' \
	'env default set-path CONDA_PREFIX .' 'env default prepend-path MANPATH share/man' \
	'env default prepend-path PKG_CONFIG_PATH lib/pkgconfig' 'env default prepend-path PYTHONPATH lib/py' \
	'env gpu set OMP_NUM_THREADS 8 4' 'env gpu append-path LD_LIBRARY_PATH .')
m=$(meta "$tmp/venv.sqfs")
[ "$(echo "$m" | grep -E '^(default-)?env ')" = "$want" ] || fail "environments: $m"
for want in '^name py-tools$' '^version 1.2.0$' '^description Python tools: lint and format$' '^target /squash/pyt$'; do
	echo "$m" | grep -E >/dev/null "$want" || fail "metadata has no line '$want': $m"
done
pk --no-meta "$src" "$tmp/nometa.sqfs"
expect_ok "--no-meta"
unsquashfs -l "$tmp/nometa.sqfs" | grep >/dev/null '\.squash' && fail "--no-meta wrote metadata"
grep -q 'metadata: none' "$tmp/out" || fail "--no-meta not reported"
for bad in "--name a/b|--name must be" "--version 1:2|--version must be" "--env x|--env 'x': write ENVNAME:OP:VAR=VALUE" \
	"--env default:unset:A=b|unknown operation 'unset'" "--env default:set:SLURM_JOB_ID=1|SLURM_\*, SPANK_\* and SQUASH_\*" \
	"--env dev:set:SPANK_X=1|SLURM_\*, SPANK_\* and SQUASH_\*" "--env none:set:A=b|'none' cannot name" \
	"--env default:prepend-path:LD_LIBRARY_PATH=lib|--env libs:prepend-path:LD_LIBRARY_PATH=lib" \
	"--env dev:prepend-path:PATH=bin:sbin|without '..', ':' or spaces" \
	"--env default:prepend-path:PATH=../bin|relative to the image's root" "--env default:set-path:X=/opt|relative to the image's root" \
	"--env 9x:set:A=b|environment's name must be" "--target /squash/a/../b|target must be an absolute path" \
	"--target relative|target must be an absolute path"; do
	pk ${bad%%|*} "$src" "$tmp/bad.sqfs"
	expect_error "${bad#*|}" "${bad%%|*}"
done
# An empty value sets the variable to ''; the summary names each
# environment and keeps a value's spaces.
pk --no-relocate --env default:set:EMPTY= --env 'dev:set:GREETING=hello world' "$src" "$tmp/envs.sqfs"
expect_ok "an empty value"
m=$(meta "$tmp/envs.sqfs")
echo "$m" | grep -x >/dev/null 'env default set EMPTY' || fail "empty value: $m"
echo "$m" | grep -x >/dev/null 'env dev set GREETING hello world' || fail "value with a space: $m"
grep -qF 'default set EMPTY; dev set GREETING hello world' "$tmp/out" ||
	fail "the summary does not name each environment or cuts a value: $(cat "$tmp/out")"
# conda's activation scripts do not run in jobs: said, with what to do.
mkdir -p "$tmp/condaenv/conda-meta" "$tmp/condaenv/etc/conda/activate.d"
printf 'export CC=gcc\n' >"$tmp/condaenv/etc/conda/activate.d/compiler.sh"
chmod -R a+rX "$tmp/condaenv"
pk --no-relocate "$tmp/condaenv" "$tmp/condaenv.sqfs"
expect_ok "a conda prefix with activation scripts"
grep -qF "warning: etc/conda/activate.d holds scripts (compiler.sh) that 'conda activate' runs and jobs do not" "$tmp/out" ||
	fail "activation scripts not warned about: $(cat "$tmp/out")"
pk --env default:prepend-path:PATH= "$src" "$tmp/bad.sqfs"
expect_error "relative to the image's root" "an empty path"
pk --description "$(printf 'two\nlines')" "$src" "$tmp/bad.sqfs"
expect_error "one line" "multi-line description"
mkdir "$tmp/odd name" && chmod a+rx "$tmp/odd name"
pk "$tmp/odd name" "$tmp/bad.sqfs"
expect_error "name 'odd name' cannot be the image's name.*--name" "DIR's name is no image name"
mkdir "$tmp/venv/.squash"
pk "$tmp/venv" "$tmp/bad.sqfs"
expect_error 'venv/.squash exists: /.squash in an image is reserved.*--no-meta' "DIR with .squash"
pk --no-meta --no-relocate "$tmp/venv" "$tmp/bad.sqfs"
expect_ok "DIR with .squash and --no-meta"
rmdir "$tmp/venv/.squash"
rm -f "$tmp/bad.sqfs"
SOURCE_DATE_EPOCH=1700000000 pk "$src" "$tmp/sde.sqfs"
meta "$tmp/sde.sqfs" | grep -x >/dev/null 'created 2023-11-14T22:13:20Z' || fail "SOURCE_DATE_EPOCH not the creation time: $(meta "$tmp/sde.sqfs")"

# --- relocation: absolute paths to DIR rewritten for the target in a
# staged copy; DIR itself never changes.
rel=$tmp/prefix/env
mkdir -p "$rel/bin" "$rel/lib/python3/site-packages" "$rel/conda-meta" "$rel/lib/pkgconfig" "$rel/etc" "$rel/share"
ln -s prefix "$tmp/via" # packed as $tmp/via/env: the path as given and the real one
P=$rel G=$tmp/via/env
printf '#!%s/bin/python3\nimport sys\n' "$P" >"$rel/bin/tool"
printf '#!%s/bin/sh\necho given\n' "$G" >"$rel/bin/given"
printf '%s/lib/python3/site-packages/extra\n' "$P" >"$rel/lib/python3/site-packages/extra.pth"
printf 'VIRTUAL_ENV="%s"\nexport VIRTUAL_ENV\n' "$P" >"$rel/bin/activate"
printf 'home = /usr/bin\ncommand = /usr/bin/python3 -m venv %s\n' "$P" >"$rel/pyvenv.cfg"
printf '{"prefix": "%s", "files": ["%s/bin/tool"]}\n' "$P" "$P" >"$rel/conda-meta/x-1.0.json"
printf 'prefix=%s\nlibdir=${prefix}/lib\n' "$P" >"$rel/lib/pkgconfig/x.pc"
printf "libdir='%s/lib'\n" "$P" >"$rel/lib/libx.la"
# Not paths to DIR: a longer name, one inside another path.
printf '%s2/bin\n/opt%s\n' "$P" "$P" >"$rel/share/not-ours"
printf '%s2' "$P" >"$rel/share/no-newline"
ln -s "$P/lib/libx.la" "$rel/lib/libx-link.la"
ln -s "$P" "$rel/share/self"
ln -s "${P}2/lib" "$rel/share/other-link"
# Compiled Python: the path is the source's name (left as it is).
printf 'XX\0\0\0\0%s/lib/mod.py' "$P" >"$rel/lib/python3/mod.cpython-311.pyc"
have_cc=false
if command -v cc >/dev/null; then
	have_cc=true
	printf 'int answer(void) { return 42; }\n' >"$tmp/lib.c"
	printf '#include <stdio.h>\nint answer(void);\nstatic const char *conf = "%s/etc/conf";\nint main(void) { printf("%%d %%s\\n", answer(), conf); return 0; }\n' "$P" >"$tmp/main.c"
	cc -shared -fPIC -o "$rel/lib/libanswer.so" "$tmp/lib.c" &&
		cc -o "$rel/bin/prog" "$tmp/main.c" -L"$rel/lib" -lanswer -Wl,-rpath,"$P/lib" ||
		fail "cannot compile the test programs"
	[ "$("$rel/bin/prog")" = "42 $P/etc/conf" ] || fail "the test program does not run: $("$rel/bin/prog" 2>&1)"
fi
chmod -R a+rX "$rel"
chmod 755 "$rel/bin/tool" "$rel/bin/given"
find "$rel" -exec touch -h -d @1600000000 {} +
# tree_sum DIR: names, types, modes, times, link targets and contents.
tree_sum() {
	(cd "$1" && find . -printf '%p %y %m %T@ %l\n' | LC_ALL=C sort &&
		find . -type f -exec md5sum {} + | LC_ALL=C sort) | md5sum
}
before=$(tree_sum "$rel")
export TMPDIR=$tmp/tmpdir
mkdir "$TMPDIR"
# no_stage_left WHAT: no staged copy left anywhere squash-pack puts one.
no_stage_left() {
	local left
	left=$(find "$tmp" "$TMPDIR" -maxdepth 2 -name '.squash-pack-stage.*' -o -maxdepth 2 -name 'squash-pack-stage.*')
	[ -z "$left" ] || fail "$1: staged copy left: $left"
	[ -z "$(ls -A "$TMPDIR")" ] || fail "$1: left in TMPDIR: $(ls -A "$TMPDIR")"
}

pk -n --target /squash/rel "$G" "$tmp/rel-dry.sqfs"
expect_ok "relocation dry run"
# 8 text files, 2 links, and the program when there is a compiler.
nfiles=10
$have_cc && nfiles=11
grep -qF "relocation: $nfiles file(s) name $P or $G: rewriting them for the target /squash/rel" "$tmp/out" ||
	fail "dry run does not report the $nfiles files: $(cat "$tmp/out")"
grep -q 'left as they are: 1 compiled Python file(s) (lib/python3/mod.cpython-311.pyc)' "$tmp/out" ||
	fail "the .pyc is not reported as left as it is: $(cat "$tmp/out")"
[ -e "$tmp/rel-dry.sqfs" ] && fail "the relocation dry run wrote the image"
no_stage_left "dry run"

# A shorter target, without patchelf: every path fits in place.
SQUASH_PACK_PATCHELF='' pk --target /squash/rel "$G" "$tmp/rel.sqfs"
expect_ok "relocation for a shorter target"
grep -q "staging: hard links to $G" "$tmp/out" || fail "staging not by hard links: $(cat "$tmp/out")"
grep -q "relocation: rewrote $nfiles file(s) for /squash/rel" "$tmp/out" || fail "rewrite not reported: $(cat "$tmp/out")"
[ "$(tree_sum "$rel")" = "$before" ] || fail "packing with relocation changed DIR"
no_stage_left "relocation"
cat_img() { unsquashfs -cat "$1" "$2" 2>&1; }
Q=/squash/rel
[ "$(cat_img "$tmp/rel.sqfs" bin/tool)" = "$(printf '#!%s/bin/python3\nimport sys' "$Q")" ] || fail "shebang: $(cat_img "$tmp/rel.sqfs" bin/tool)"
[ "$(cat_img "$tmp/rel.sqfs" bin/given)" = "$(printf '#!%s/bin/sh\necho given' "$Q")" ] || fail "shebang with the path as given: $(cat_img "$tmp/rel.sqfs" bin/given)"
for f in lib/python3/site-packages/extra.pth bin/activate pyvenv.cfg conda-meta/x-1.0.json lib/pkgconfig/x.pc lib/libx.la; do
	got=$(cat_img "$tmp/rel.sqfs" "$f")
	[ "$got" = "$(sed "s|$P|$Q|g" "$rel/$f")" ] || fail "$f not rewritten: $got"
done
[ "$(cat_img "$tmp/rel.sqfs" share/not-ours)" = "$(cat "$rel/share/not-ours")" ] || fail "a longer name or another path was rewritten"
cat_img "$tmp/rel.sqfs" lib/python3/mod.cpython-311.pyc | cmp -s - "$rel/lib/python3/mod.cpython-311.pyc" || fail "the .pyc changed"
listing=$(unsquashfs -lln "$tmp/rel.sqfs")
for l in "lib/libx-link.la -> $Q/lib/libx.la" "share/self -> $Q" "share/other-link -> ${P}2/lib"; do
	echo "$listing" | grep -F >/dev/null "squashfs-root/$l" || fail "link $l: $listing"
done
# (/.squash and its metadata are made at packing: the packing's time.)
lost=$(echo "$listing" | grep -E '^[-dl]' | grep -v ' 2020-09-13 ' | grep -v 'squashfs-root/\.squash')
[ -z "$lost" ] || fail "rewritten files, links or their directories lost their times: $lost"
echo "$listing" | grep -E >/dev/null '^-rwxr-xr-x 0/0 .*squashfs-root/bin/tool$' || fail "rewritten script lost its mode: $listing"
if $have_cc; then
	rm -rf "$tmp/x" && unsquashfs -q -no-progress -d "$tmp/x" "$tmp/rel.sqfs" >/dev/null
	[ "$(LD_LIBRARY_PATH=$tmp/x/lib "$tmp/x/bin/prog")" = "42 $Q/etc/conf" ] ||
		fail "the padded program: $(LD_LIBRARY_PATH=$tmp/x/lib "$tmp/x/bin/prog" 2>&1)"
	grep -c "$P" "$tmp/x/bin/prog" >/dev/null && fail "the program still names $P"
	if command -v readelf >/dev/null; then
		readelf -d "$tmp/x/bin/prog" | grep -E >/dev/null "\(RUNPATH\).*\[$Q/lib\]" || fail "RUNPATH not rewritten: $(readelf -d "$tmp/x/bin/prog")"
	fi
fi
meta "$tmp/rel.sqfs" | grep -x >/dev/null 'target /squash/rel' || fail "the metadata's target is not the relocation's"

# A longer target: text at any length; binary strings do not fit.
long=/squash/a-target-longer-than-the-directory-it-was-built-in
if $have_cc; then
	SQUASH_PACK_PATCHELF='' pk --target "$long" "$G" "$tmp/long.sqfs"
	expect_error "cannot make the image work at $long: 1 file\(s\) hold the path .* does not fit: bin/prog \(binary data\)\. Use a target of at most ${#G} characters \(--target\), build the tree at its target .*--no-relocate" "longer target"
	[ -e "$tmp/long.sqfs" ] && fail "the refused relocation wrote an image"
	[ "$(tree_sum "$rel")" = "$before" ] || fail "a refused relocation changed DIR"
	no_stage_left "refused relocation"
	# As it is: the paths stay.
	pk --no-relocate --target "$long" "$G" "$tmp/asis.sqfs"
	expect_ok "--no-relocate"
	[ "$(cat_img "$tmp/asis.sqfs" bin/tool)" = "$(cat "$rel/bin/tool")" ] || fail "--no-relocate rewrote a file"
	rm -f "$rel/bin/prog" # the string in it is what cannot move
fi
pk --target "$long" "$G" "$tmp/long.sqfs"
expect_ok "longer target, text only"
[ "$(cat_img "$tmp/long.sqfs" lib/pkgconfig/x.pc)" = "$(sed "s|$P|$long|g" "$rel/lib/pkgconfig/x.pc")" ] || fail "text not rewritten for a longer target"
no_stage_left "longer target"
# RPATH/RUNPATH at any length with patchelf (a Spack-like program whose
# only path is its RUNPATH), or refused without it.
if $have_cc; then
	printf '#include <stdio.h>\nint answer(void);\nint main(void) { printf("%%d\\n", answer()); return 0; }\n' >"$tmp/rp.c"
	cc -o "$rel/bin/prog" "$tmp/rp.c" -L"$rel/lib" -lanswer -Wl,-rpath,"$P/lib" || fail "cannot compile"
	chmod a+rx "$rel/bin/prog"
	SQUASH_PACK_PATCHELF='' pk -f --target "$long" "$G" "$tmp/long.sqfs"
	expect_error "bin/prog \(an RPATH/RUNPATH\)\. .*or install patchelf" "RUNPATH with a longer target, no patchelf"
	cc -o "$rel/bin/prog-rpath" "$tmp/rp.c" -L"$rel/lib" -lanswer -Wl,--disable-new-dtags,-rpath,"$P/lib:$P/lib64" || fail "cannot compile"
	chmod a+rx "$rel/bin/prog-rpath"
	if command -v patchelf >/dev/null; then
		pk -f --target "$long" "$G" "$tmp/long.sqfs"
		expect_ok "RUNPATH with a longer target, patchelf"
		rm -rf "$tmp/x" && unsquashfs -q -no-progress -d "$tmp/x" "$tmp/long.sqfs" >/dev/null
		[ "$(patchelf --print-rpath "$tmp/x/bin/prog")" = "$long/lib" ] || fail "patchelf's RUNPATH: $(patchelf --print-rpath "$tmp/x/bin/prog")"
		[ "$(patchelf --print-rpath "$tmp/x/bin/prog-rpath")" = "$long/lib:$long/lib64" ] || fail "patchelf's RPATH: $(patchelf --print-rpath "$tmp/x/bin/prog-rpath")"
		if command -v readelf >/dev/null; then
			readelf -d "$tmp/x/bin/prog" | grep >/dev/null '(RUNPATH)' || fail "RUNPATH became another tag"
			readelf -d "$tmp/x/bin/prog-rpath" | grep >/dev/null '(RPATH)' || fail "RPATH became another tag"
		fi
		[ "$(LD_LIBRARY_PATH=$tmp/x/lib "$tmp/x/bin/prog")" = 42 ] || fail "patched program does not run"
		grep -c "$P" "$tmp/x/bin/prog" >/dev/null && fail "the patched program still names $P"
	fi
	no_stage_left "patchelf"
fi
before=$(tree_sum "$rel")
# An error after staging (mksquashfs refuses an option) leaves no stage.
pk -f --target /squash/rel "$G" "$tmp/rel.sqfs" -- -no-such-option
[ "$rc" = 1 ] || fail "mksquashfs failure: exit $rc"
no_stage_left "mksquashfs failure"
[ "$(tree_sum "$rel")" = "$before" ] || fail "a failed pack changed DIR"
# Stopped while packing (SIGTERM: a job's time limit, a kill; Ctrl-C's
# SIGINT takes the same trap, but a shell started in the background, as a
# test run may be, ignores SIGINT for good): the stage goes too. The signal
# reaches mksquashfs as well, which ends of it.
mkdir -p "$tmp/fakebin2"
printf '#!/bin/sh\nkill -TERM $PPID\nkill -TERM $$\nsleep 5\n' >"$tmp/fakebin2/mksquashfs"
chmod 755 "$tmp/fakebin2/mksquashfs"
PATH=$tmp/fakebin2:$PATH pk -f --target /squash/rel "$G" "$tmp/rel.sqfs"
[ "$rc" = 130 ] || fail "interrupted: exit $rc, expected 130: $(cat "$tmp/out")"
no_stage_left "interrupt"
# Where no hard links can be made: a full copy in TMPDIR, removed too.
mkdir -p "$tmp/fakebin3"
printf '#!/bin/sh\n[ "$1" = -al ] && exit 1\nexec %s "$@"\n' "$(command -v cp)" >"$tmp/fakebin3/cp"
chmod 755 "$tmp/fakebin3/cp"
PATH=$tmp/fakebin3:$PATH pk -f --target /squash/rel "$G" "$tmp/rel.sqfs"
expect_ok "staging by copy"
grep -q "staging: copying $G .* to $TMPDIR/squash-pack-stage\." "$tmp/out" || fail "copy staging not reported: $(cat "$tmp/out")"
[ "$(cat_img "$tmp/rel.sqfs" lib/pkgconfig/x.pc)" = "$(sed "s|$P|/squash/rel|g" "$rel/lib/pkgconfig/x.pc")" ] || fail "copy staging: not rewritten"
no_stage_left "copy staging"
[ "$(tree_sum "$rel")" = "$before" ] || fail "copy staging changed DIR"
# Built at its target: nothing to rewrite.
pk --target "$rel" "$rel" "$tmp/at.sqfs"
expect_ok "built at the target"
grep -q "relocation: none needed: .* is the target" "$tmp/out" || fail "packing at the target not reported: $(cat "$tmp/out")"
pk --target "$rel/sub" "$rel" "$tmp/in.sqfs"
expect_error "lies inside" "target inside DIR"
# A tree without paths to it: one search, nothing staged.
pk --target /squash/x "$src" "$tmp/none.sqfs"
expect_ok "nothing to relocate"
grep -q "relocation: no path to .* in the tree" "$tmp/out" || fail "no paths not reported: $(cat "$tmp/out")"
grep -q staging "$tmp/out" && fail "staged without paths to rewrite"
# A tree built for another place (a uenv stack's /user-environment, a
# prefix taken out of a container): --relocate-from rewrites its paths too.
ue=$tmp/uenv-copy
mkdir -p "$ue/bin" "$ue/etc"
printf '#!/user-environment/bin/sh\necho ue\n' >"$ue/bin/run"
printf 'root=/user-environment\nlib=/user-environment/lib\nnot=/user-environment2\n' >"$ue/etc/conf"
ln -s /user-environment/etc/conf "$ue/etc/link"
chmod -R a+rX "$ue"
pk --relocate-from /user-environment --target /squash/ue "$ue" "$tmp/ue.sqfs"
expect_ok "--relocate-from"
grep -qF "name $ue or /user-environment: rewriting them for the target /squash/ue" "$tmp/out" ||
	fail "--relocate-from not reported: $(cat "$tmp/out")"
[ "$(cat_img "$tmp/ue.sqfs" bin/run)" = "$(printf '#!/squash/ue/bin/sh\necho ue')" ] || fail "--relocate-from shebang: $(cat_img "$tmp/ue.sqfs" bin/run)"
[ "$(cat_img "$tmp/ue.sqfs" etc/conf)" = "$(printf 'root=/squash/ue\nlib=/squash/ue/lib\nnot=/user-environment2')" ] ||
	fail "--relocate-from text: $(cat_img "$tmp/ue.sqfs" etc/conf)"
unsquashfs -lln "$tmp/ue.sqfs" | grep -F >/dev/null 'squashfs-root/etc/link -> /squash/ue/etc/conf' || fail "--relocate-from link: $(unsquashfs -lln "$tmp/ue.sqfs")"
pk --relocate-from /squash --target /squash/ue "$ue" "$tmp/bad.sqfs"
expect_error "the target /squash/ue is /squash or lies below it" "--relocate-from above the target"
pk --relocate-from user-environment "$ue" "$tmp/bad.sqfs"
expect_error "--relocate-from must be an absolute path" "--relocate-from relative"
pk --no-relocate --relocate-from /user-environment "$ue" "$tmp/bad.sqfs"
expect_error "drop --no-relocate" "--relocate-from with --no-relocate"
unset TMPDIR

# --- bundles: a dataset split by top-level entries, with a manifest
# Subjects of about 100 KiB each (a directory's own size varies with the
# file system, up to 4 KiB each here: the limits leave room for it).
ds=$tmp/ds
mkdir "$ds"
for s in sub-01 sub-02 sub-03 sub-04 sub-05; do
	mkdir -p "$ds/$s/anat" "$ds/$s/func"
	head -c 102400 /dev/urandom >"$ds/$s/anat/T1w.bin"
	echo "$s" >"$ds/$s/func/info.txt"
done
wst=$'with space\tand tab' # written with space\tand tab in the manifest
mkdir "$ds/big" "$ds/many" "$ds/$wst"
head -c 307200 /dev/urandom >"$ds/big/huge.bin"                        # over 250K: alone
for i in 01 02 03 04 05 06 07 08 09 10 11 12; do echo "$i" >"$ds/many/f$i"; done  # 13 files: over 10
echo notes >"$ds/notes.txt"
echo hidden >"$ds/.hidden"
echo 'back\slash' >"$ds/$wst/a\b"
ln -s sub-05 "$ds/latest"
chmod -R a+rX "$ds"
# Fixed times: every bundle's creation time is its newest file's.
find "$ds" -exec touch -h -d @1600000000 {} +
touch -h -d @1650000000 "$ds/sub-03/func/info.txt"
touch -d @1600000000 "$ds"

# manifest DIR: "bundle entry" per line, from DIR/bundle.manifest.tsv.
manifest() { grep -v '^#' "$1/bundle.manifest.tsv" | awk -F'\t' 'NR > 1 { print $1 " " $2 }'; }
# union_ok DIR: every file of $ds in exactly one bundle of DIR, with its
# type, mode, size, time and content.
union_ok() {
	local b list=$tmp/list
	: >"$list"
	for b in "$1"/bundle_*.sqfs; do
		unsquashfs -l -d R "$b" | sed -n 's|^R/||p' | grep -v '^\.squash' >>"$list"
	done
	[ -z "$(sort "$list" | uniq -d)" ] || fail "$1: in more than one bundle: $(sort "$list" | uniq -d)"
	[ "$(sort "$list")" = "$(cd "$ds" && find . -mindepth 1 -printf '%P\n' | sort)" ] ||
		fail "$1: the bundles do not hold the tree: $(diff <(sort "$list") <(cd "$ds" && find . -mindepth 1 -printf '%P\n' | sort))"
	rm -rf "$tmp/union"
	for b in "$1"/bundle_*.sqfs; do
		unsquashfs -q -no-progress -f -d "$tmp/union" "$b" >/dev/null || fail "unsquashfs $b failed"
	done
	# (/.squash: every bundle's metadata, checked below)
	diff -r -x .squash --no-dereference "$ds" "$tmp/union" >/dev/null || fail "$1: contents differ: $(diff -r -x .squash --no-dereference "$ds" "$tmp/union" 2>&1 | head -5)"
	attrs() { (cd "$1" && find . -path ./.squash -prune -o -printf '%P %y %m %Ts\n' && find . -path ./.squash -prune -o -type f -printf '%P %s\n') | sort; }
	[ "$(attrs "$ds")" = "$(attrs "$tmp/union")" ] ||
		fail "$1: types, modes, sizes or times differ: $(diff <(attrs "$ds") <(attrs "$tmp/union"))"
}

# By size: in name order (byte order: ".hidden" first), a bundle takes
# entries while they fit; "big" is over the size by itself and alone.
mkdir "$tmp/bs"
pk --bundle-size 250K "$ds" "$tmp/bs"
expect_ok "--bundle-size"
want=$(printf '%s\n' 'bundle_000.sqfs .hidden' 'bundle_001.sqfs big' 'bundle_002.sqfs latest' \
	'bundle_002.sqfs many' 'bundle_002.sqfs notes.txt' 'bundle_002.sqfs sub-01' 'bundle_002.sqfs sub-02' \
	'bundle_003.sqfs sub-03' 'bundle_003.sqfs sub-04' 'bundle_004.sqfs sub-05' 'bundle_004.sqfs with space\tand tab')
[ "$(manifest "$tmp/bs")" = "$want" ] || fail "--bundle-size 250K assignment: $(manifest "$tmp/bs")"
[ "$(ls "$tmp/bs")" = "$(printf '%s\n' bundle.manifest.tsv bundle_00{0,1,2,3,4}.sqfs)" ] ||
	fail "--bundle-size 250K wrote: $(ls -A "$tmp/bs")"
grep -q '^squash-pack: bundle_001.sqfs: 1 entry (big), .*alone in its bundle: larger than --bundle-size 250K' "$tmp/out" ||
	fail "oversize entry not reported: $(cat "$tmp/out")"
grep -qx "squash-pack: use them with: sbatch --squash-image='$tmp/bs/bundle_\*.sqfs:/squash/ds' ..." "$tmp/out" ||
	fail "no --squash-image line: $(cat "$tmp/out")"
grep -qP '^bundle_001\.sqfs\tbig\t3[0-9]{5}\t2\tlarger than --bundle-size 250K$' "$tmp/bs/bundle.manifest.tsv" ||
	fail "manifest row of big: $(cat "$tmp/bs/bundle.manifest.tsv")"
grep -qP '^bundle_004\.sqfs\twith space\\tand tab\t[0-9]+\t2\t$' "$tmp/bs/bundle.manifest.tsv" ||
	fail "manifest row of the name with a tab: $(cat "$tmp/bs/bundle.manifest.tsv")"
grep -qP "^# source\t$tmp/ds$" "$tmp/bs/bundle.manifest.tsv" || fail "manifest names no source"
union_ok "$tmp/bs"
# Every bundle holds the same metadata: the data set's name and target,
# created at its newest time, no environment.
m=$(meta "$tmp/bs/bundle_000.sqfs")
for b in "$tmp"/bs/bundle_*.sqfs; do
	[ "$(meta "$b")" = "$m" ] || fail "${b##*/}'s metadata differs from bundle_000's: $(meta "$b")"
done
for want in '^name ds$' '^target /squash/ds$' '^created 2022-04-15T05:20:00Z$' "^source $tmp/ds\$"; do
	echo "$m" | grep -E >/dev/null "$want" || fail "bundle metadata has no line '$want': $m"
done
echo "$m" | grep -E >/dev/null '^(default-)?env' && fail "bundle metadata holds an environment: $m"
super "$tmp/bs/bundle_003.sqfs" | grep >/dev/null '^Compression zstd' || fail "bundles are not zstd"
unsquashfs -lln "$tmp/bs/bundle_001.sqfs" | grep -E >/dev/null '^drwxr-xr-x 0/0 .*squashfs-root/big$' ||
	fail "a directory alone in its bundle is not kept as a directory: $(unsquashfs -lln "$tmp/bs/bundle_001.sqfs")"
ctime() { TZ=UTC unsquashfs -s "$1" | sed -n 's/^Creation or last append time //p'; }
[ "$(ctime "$tmp/bs/bundle_003.sqfs")" = "$(TZ=UTC date -d @1650000000 '+%a %b %e %T %Y')" ] ||
	fail "bundle_003's creation time is not its newest file's: $(ctime "$tmp/bs/bundle_003.sqfs")"
[ "$(ctime "$tmp/bs/bundle_004.sqfs")" = "$(TZ=UTC date -d @1600000000 '+%a %b %e %T %Y')" ] ||
	fail "bundle_004's creation time is not its newest file's: $(ctime "$tmp/bs/bundle_004.sqfs")"

# Reproducible: the same tree and options, the same bytes.
mkdir "$tmp/bs2"
pk -q --bundle-size 250K "$ds" "$tmp/bs2"
expect_ok "--bundle-size again"
[ -s "$tmp/out" ] && fail "-q printed: $(cat "$tmp/out")"
for f in "$tmp"/bs/*; do
	cmp -s "$f" "$tmp/bs2/${f##*/}" || fail "packed twice, ${f##*/} differs"
done

# By file count: "many" (13 files) is over 10 and alone.
mkdir "$tmp/bf"
pk --bundle-files 10 --bundle-name hcp --target /data/hcp "$ds" "$tmp/bf"
expect_ok "--bundle-files"
want=$(printf '%s\n' 'hcp_000.sqfs .hidden' 'hcp_000.sqfs big' 'hcp_000.sqfs latest' 'hcp_001.sqfs many' \
	'hcp_002.sqfs notes.txt' 'hcp_002.sqfs sub-01' 'hcp_003.sqfs sub-02' 'hcp_003.sqfs sub-03' \
	'hcp_004.sqfs sub-04' 'hcp_004.sqfs sub-05' 'hcp_005.sqfs with space\tand tab')
got=$(grep -v '^#' "$tmp/bf/hcp.manifest.tsv" | awk -F'\t' 'NR > 1 { print $1 " " $2 }')
[ "$got" = "$want" ] || fail "--bundle-files 10 assignment: $got"
grep -q "hcp_001.sqfs: 1 entry (many), .*alone in its bundle: more files than --bundle-files 10" "$tmp/out" ||
	fail "entry over --bundle-files not reported: $(cat "$tmp/out")"
grep -q "use them with: sbatch --squash-image='$tmp/bf/hcp_\*.sqfs:/data/hcp'" "$tmp/out" ||
	fail "--bundle-name/--target not in the printed line: $(cat "$tmp/out")"

# An earlier run's bundles (here one more than the new run makes) are kept
# without --force; with it the new set replaces them and the extra old
# bundle goes, so that the glob finds exactly the new set.
mkdir "$tmp/bx"
cp "$tmp"/bs/* "$tmp/bx" && echo old >"$tmp/bx/bundle_005.sqfs"
sum=$(cat "$tmp"/bx/* | md5sum)
pk --bundle-size 250K "$ds" "$tmp/bx"
expect_error 'already holds bundles \(bundle_000.sqfs and 5 more\): use --force' "bundles exist"
[ "$(cat "$tmp"/bx/* | md5sum)" = "$sum" ] || fail "existing bundles changed without --force"
touch "$tmp/bx/bundle_old.sqfs"
pk --force --bundle-size 250K "$ds" "$tmp/bx"
expect_ok "bundles --force"
grep -q 'removed bundle_005.sqfs of the earlier run' "$tmp/out" || fail "stale bundle removal not reported"
grep -q 'bundle_old.sqfs matches the glob bundle_\*.sqfs too' "$tmp/out" || fail "stray bundle_old.sqfs not reported"
for f in "$tmp"/bs/*; do
	cmp -s "$f" "$tmp/bx/${f##*/}" || fail "--force: ${f##*/} differs from a fresh pack"
done
[ "$(ls -A "$tmp/bx")" = "$(ls -A "$tmp/bs"; echo bundle_old.sqfs)" ] || fail "--force left: $(ls -A "$tmp/bx")"

# SOURCE_DATE_EPOCH: mksquashfs's own; the bundles' creation time.
mkdir "$tmp/be"
SOURCE_DATE_EPOCH=1700000000 pk --bundle-files 100 "$ds" "$tmp/be"
expect_ok "SOURCE_DATE_EPOCH"
[ "$(ctime "$tmp/be/bundle_000.sqfs")" = "$(TZ=UTC date -d @1700000000 '+%a %b %e %T %Y')" ] ||
	fail "SOURCE_DATE_EPOCH not the creation time: $(ctime "$tmp/be/bundle_000.sqfs")"

# Escaped for --squash-image: , : \ % and glob characters of the directory.
odd="$tmp/o,1:[x]%"
mkdir "$odd"
pk -n --bundle-files 100 "$ds" "$odd"
expect_ok "dry run of bundles"
grep -qF "sbatch --squash-image='$tmp/o\\,1\\:[[]x]%%/bundle_*.sqfs:/squash/ds'" "$tmp/out" ||
	fail "directory not escaped for --squash-image: $(cat "$tmp/out")"
[ -z "$(ls -A "$odd")" ] || fail "--dry-run wrote bundles: $(ls -A "$odd")"

# Refusals.
mkdir "$tmp/empty" "$tmp/wide"
(cd "$tmp/wide" && touch f{0000..1024})
for bad in "--bundle-size 0|bundle size must be a size above 0" \
	"--bundle-size 1.5X|bundle size must be" "--bundle-size -5|bundle size must be" \
	"--bundle-files 0|bundle file count must be a number above 0" "--bundle-files ten|bundle file count" \
	"--bundle-files 10 --bundle-name a/b|bundle name must be" \
	"--bundle-files 10 --target data|target must be an absolute path" \
	"--bundle-files 10 --target /squash/a:b|target must be" \
	"--bundle-name x|--bundle-name goes with --bundle-size" \
	"--bundle-files 10 --env default:set:A=b|--env is for single images"; do
	# shellcheck disable=SC2086
	pk ${bad%%|*} "$ds" "$tmp/bf"
	expect_error "${bad#*|}" "${bad%%|*}"
done
pk --bundle-files 10 "$ds" "$tmp/nodir"
expect_error 'nodir does not exist: create it first' "bundles into a missing directory"
pk --bundle-files 10 "$ds" "$tmp/ds/notes.txt"
expect_error 'is not a directory: with --bundle-size or --bundle-files' "bundles into a file"
pk --bundle-files 10 "$ds" "$ds/many"
expect_error 'inside' "bundles inside the tree"
pk --bundle-files 10 "$tmp/empty" "$tmp/bf"
expect_error 'empty: nothing to bundle' "empty tree"
pk --bundle-files 1 "$tmp/wide" "$tmp/empty"
expect_error '1025 bundles, more than the 1024 images a job may have' "too many bundles"
pk --bundle-size
expect_usage_error 'needs a value' "--bundle-size without a value"
pk --no-such-option "$tmp/wide" "$tmp/x.sqfs"
expect_usage_error "unknown option '--no-such-option'" "an unknown option"
# Hard links at the top: du names the file once unless told to count links.
mkdir "$tmp/hl" "$tmp/hlout"
echo linked >"$tmp/hl/a" && ln "$tmp/hl/a" "$tmp/hl/b"
pk --bundle-files 1 "$tmp/hl" "$tmp/hlout"
expect_ok "hard-linked entries"
[ "$(manifest "$tmp/hlout")" = "$(printf '%s\n' 'bundle_000.sqfs a' 'bundle_001.sqfs b')" ] ||
	fail "hard-linked entries: $(manifest "$tmp/hlout")"
[ -z "$(ls -A "$tmp/empty")" ] || fail "a refused run wrote: $(ls -A "$tmp/empty")"

if [ "$failures" -gt 0 ]; then
	echo "$failures check(s) failed" >&2
	exit 1
fi
echo "squash-pack: all checks passed"

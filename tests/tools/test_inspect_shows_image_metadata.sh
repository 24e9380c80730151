#!/usr/bin/env bash
# squash_image_meta_show (daemon/cli/image_meta_show.c) through
# `squash-images inspect FILE`: an image's /.squash/meta shown as text and JSON
# without mounting it, through the project's reader (squash-reader --cat,
# no squashfs-tools needed), for each compressor mksquashfs offers; an
# image without one, and refusals: metadata that does not parse (its
# line), a symbolic link, output past 64 KiB (a fake reader that never
# stops), no reader. Needs mksquashfs and the built squash-reader
# (skipped, exit 77, without them); run by make check. An image without
# metadata that is a container's root file system gets a note. A uenv
# image's meta/env.json is shown as its metadata.
set -uo pipefail

images=${SQUASH_IMAGES:-$PWD/../daemon/squash-images}
export SQUASH_READER=${SQUASH_READER:-$PWD/../daemon/reader/squash-reader}
show() { # [--json] IMAGE
	if [ "$1" = --json ]; then "$images" inspect --json "$2"; else "$images" inspect "$1"; fi
}
for t in mksquashfs python3; do
	command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
[ -x "$SQUASH_READER" ] || { echo "SKIP: no squash-reader at $SQUASH_READER"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# image NAME META-TEXT [MKSQUASHFS-OPTION...] (empty text: no .squash/meta)
image() {
	local src=$tmp/src-$1 name=$1 text=$2
	shift 2
	mkdir -p "$src/bin"
	echo x >"$src/bin/tool"
	if [ -n "$text" ]; then mkdir -p "$src/.squash" && printf '%s' "$text" >"$src/.squash/meta"; fi
	mksquashfs "$src" "$tmp/$name.sqfs" -quiet -no-progress -all-root -noappend "$@" >/dev/null || fail "mksquashfs $name"
}

image good 'format 1
name tool
version 1.0
description A "quoted" tool
target /squash/tool
default-env default
env default prepend-path PATH bin
env default set GREETING hello world
env dev set-path TOOL_HOME .
'
show "$tmp/good.sqfs" >"$tmp/out" 2>&1 || fail "text: $(cat "$tmp/out")"
sed -n '/^metadata/,$p' "$tmp/out" | diff -u - <(cat <<EOT
metadata (/.squash/meta):
  name: tool
  version: 1.0
  description: A "quoted" tool
  target: /squash/tool
  default-env: default
  env default:
    prepend-path PATH bin
    set GREETING hello world
  env dev:
    set-path TOOL_HOME .
EOT
) || fail "text output"
grep -q "^file: *$tmp/good.sqfs$" "$tmp/out" || fail "text output: no file line"
show --json "$tmp/good.sqfs" >"$tmp/out" 2>&1 || fail "json: $(cat "$tmp/out")"
python3 - "$tmp/out" "$tmp/good.sqfs" <<'EOT' || fail "json output: $(cat "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["metadata"]
assert d["file"] == sys.argv[2], d
assert m["format"] == 1 and m["name"] == "tool" and m["description"] == 'A "quoted" tool', m
assert m["created"] is None and m["default-env"] == "default", m
assert m["environments"] == {
    "default": [{"op": "prepend-path", "var": "PATH", "value": "bin"},
                {"op": "set", "var": "GREETING", "value": "hello world"}],
    "dev": [{"op": "set-path", "var": "TOOL_HOME", "value": "."}]}, m["environments"]
EOT

# Every compressor this mksquashfs offers, read by the same reader.
comps=$(mksquashfs 2>&1 | sed -n '/^Compressors available/,/^$/p' | grep -E $'^\t(gzip|lzo|lz4|xz|zstd)( |$)' | awk '{ print $1 }' | sort -u)
[ -n "$comps" ] || comps=gzip
for c in $comps; do
	image "comp-$c" "$(printf 'format 1\nname %s\n' "$c")" -comp "$c"
	show "$tmp/comp-$c.sqfs" >"$tmp/out" 2>&1 && grep -q "^  name: $c$" "$tmp/out" ||
		fail "a $c image: $(cat "$tmp/out")"
done

image plain ''
show "$tmp/plain.sqfs" >"$tmp/out" 2>&1 || fail "no metadata: $(cat "$tmp/out")"
grep -q '^metadata: *none (the image has no /.squash/meta' "$tmp/out" || fail "no metadata text: $(cat "$tmp/out")"
show --json "$tmp/plain.sqfs" >"$tmp/out" 2>&1 || fail "no metadata json"
grep -q '"metadata":null}' "$tmp/out" || fail "no metadata json: $(cat "$tmp/out")"

# A container's whole root file system (enroot's .sqsh, say): one note,
# whether etc/os-release is a file or, as often, a link; not for an OS
# tree half there, nor for an image with metadata (packed for its target).
note="note:        a container's root file system (it has etc/os-release and usr/bin): its programs expect to be at '/', so it is for Pyxis/enroot or Apptainer, not for a mount at /squash/NAME; to use a prefix from it, extract that directory and pack it (unsquashfs -d DIR IMAGE opt/TOOL; squash-pack --relocate-from /opt/TOOL DIR/opt/TOOL TOOL.sqfs)"
rootfs() { # NAME META-TEXT [WHAT...]: WHAT is os-release, os-release-link or usr-bin
	local src=$tmp/src-$1 name=$1 text=$2 w
	shift 2
	mkdir -p "$src/opt/tool/bin" && echo x >"$src/opt/tool/bin/tool"
	for w in "$@"; do
		case $w in
		os-release) mkdir -p "$src/etc" && echo ID=debian >"$src/etc/os-release" ;;
		os-release-link) mkdir -p "$src/etc" "$src/usr/lib" && echo ID=debian >"$src/usr/lib/os-release" &&
			ln -s ../usr/lib/os-release "$src/etc/os-release" ;;
		usr-bin) mkdir -p "$src/usr/bin" && echo x >"$src/usr/bin/ls" ;;
		esac
	done
	if [ -n "$text" ]; then mkdir -p "$src/.squash" && printf '%s' "$text" >"$src/.squash/meta"; fi
	mksquashfs "$src" "$tmp/$name.sqfs" -quiet -no-progress -all-root -noappend >/dev/null || fail "mksquashfs $name"
}
rootfs os '' os-release usr-bin
rootfs os-link '' os-release-link usr-bin
for i in os os-link; do
	show "$tmp/$i.sqfs" >"$tmp/out" 2>&1 || fail "$i: $(cat "$tmp/out")"
	tail -2 "$tmp/out" | diff -u - <(printf 'metadata:    none (the image has no /.squash/meta, which squash-pack writes, nor a uenv /meta/env.json)\n%s\n' "$note") ||
		fail "$i: no container note"
done
rootfs no-bin '' os-release
rootfs no-os-release '' usr-bin
rootfs packed 'format 1
name tool
' os-release usr-bin
for i in no-bin no-os-release packed plain; do
	show "$tmp/$i.sqfs" >"$tmp/out" 2>&1 || fail "$i: $(cat "$tmp/out")"
	grep -q '^note:' "$tmp/out" && fail "$i: a container note: $(cat "$tmp/out")"
done
show --json "$tmp/os.sqfs" >"$tmp/out" 2>&1 && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out" ||
	fail "container root, json: $(cat "$tmp/out")"

image typo 'format 1
name tool
nmae tool
'
show "$tmp/typo.sqfs" >"$tmp/out" 2>&1 && fail "a typo was shown"
grep -q "typo.sqfs: /.squash/meta: line 3: unknown key 'nmae'" "$tmp/out" || fail "typo message: $(cat "$tmp/out")"

# A symbolic link to a file outside the image: never followed.
mkdir -p "$tmp/src-link/.squash" && ln -s /etc/passwd "$tmp/src-link/.squash/meta"
mksquashfs "$tmp/src-link" "$tmp/link.sqfs" -quiet -no-progress -all-root -noappend >/dev/null
show "$tmp/link.sqfs" >"$tmp/out" 2>&1 && fail "a link was shown"
grep -q "link.sqfs: cannot read /.squash/meta: .*not a regular file" "$tmp/out" || fail "link message: $(cat "$tmp/out")"

# A uenv image: no /.squash/meta, its views in /meta/env.json.
mkdir -p "$tmp/src-uenv/meta"
cat >"$tmp/src-uenv/meta/env.json" <<'JSON'
{"name": "gnu", "mount": "/user-environment", "views": {"default": {"env": {"values": {
 "list": {"PATH": [{"op": "prepend", "value": ["/user-environment/env/default/bin", "/opt/x/bin"]}]},
 "scalar": {"GONE": null, "EMPTY": ""}}}}, "modules": {"activate": "/dev/null"}}}
JSON
mksquashfs "$tmp/src-uenv" "$tmp/uenv.sqfs" -quiet -no-progress -all-root -noappend >/dev/null
show "$tmp/uenv.sqfs" >"$tmp/out" 2>&1 || fail "uenv: $(cat "$tmp/out")"
grep -qzF 'metadata (/meta/env.json):
  name: gnu
  target: /user-environment
  env default:
    prepend-path PATH /opt/x/bin
    prepend-path PATH env/default/bin
    unset GONE
    set EMPTY ""
  env modules:
    (cannot be applied: it has only an activation script' "$tmp/out" || fail "uenv shown: $(cat "$tmp/out")"
show --json "$tmp/uenv.sqfs" >"$tmp/out" 2>&1 || fail "uenv json: $(cat "$tmp/out")"
python3 - "$tmp/out" <<'PY' || fail "uenv json: $(cat "$tmp/out")"
import json, sys
m = json.load(open(sys.argv[1]))["metadata"]
assert m["file"] == "meta/env.json" and m["target"] == "/user-environment", m
assert m["environments"]["default"][0] == {"op": "prepend-path", "var": "PATH", "value": "/opt/x/bin"}, m
PY
# A file of that name that is not uenv's is no metadata.
mkdir -p "$tmp/src-other/meta" && echo '{"schema": 2}' >"$tmp/src-other/meta/env.json"
mksquashfs "$tmp/src-other" "$tmp/other.sqfs" -quiet -no-progress -all-root -noappend >/dev/null
show "$tmp/other.sqfs" >"$tmp/out" 2>&1 || fail "other: $(cat "$tmp/out")"
grep -q "^metadata:    none" "$tmp/out" || fail "other shown: $(cat "$tmp/out")"

show "$tmp/missing.sqfs" >"$tmp/out" 2>&1 && fail "a missing image was shown"
grep -q "missing.sqfs: No such file or directory" "$tmp/out" || fail "missing: $(cat "$tmp/out")"

# A hostile reader's output that never ends is cut at 64 KiB.
mkdir "$tmp/fake" && printf '#!/bin/sh\nexec yes format 1\n' >"$tmp/fake/reader" && chmod +x "$tmp/fake/reader"
timeout 20 env SQUASH_READER="$tmp/fake/reader" "$images" inspect "$tmp/good.sqfs" >"$tmp/out" 2>&1 && fail "endless output was shown"
grep -q "is more than the 65536 bytes a metadata file may have" "$tmp/out" || fail "endless: $(cat "$tmp/out")"
timeout 20 env SQUASH_READER="$tmp/nothing/squash-reader" "$images" inspect "$tmp/good.sqfs" >"$tmp/out" 2>&1 && fail "shown without a reader"
grep -q "squash-reader (of slurm-squash) is needed" "$tmp/out" || fail "no reader: $(cat "$tmp/out")"
# Nothing of squashfs-tools is needed.
timeout 20 env PATH="$tmp/nothing" "$images" inspect "$tmp/good.sqfs" >"$tmp/out" 2>&1 || fail "without squashfs-tools: $(cat "$tmp/out")"

[ "$failures" = 0 ] || exit 1
echo "squash-images inspect: metadata: all checks passed"

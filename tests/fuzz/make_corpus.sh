#!/bin/sh
# Regenerates the seed corpora under corpus/: valid request and response
# frames (from gen_request_corpus.c), superblocks of real mksquashfs images
# with every compressor, and option strings. Needs cc, protoc-c,
# libprotobuf-c, libmunge and mksquashfs.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$here/corpus/request" "$here/corpus/frame" \
	"$here/corpus/superblock" "$here/corpus/imagespec"

# Request frames.
protoc-c --proto_path="$top/proto" --c_out="$work" "$top/proto/squash.proto"
printf '#define _GNU_SOURCE 1\n' >"$work/config.h"
cc -O1 -I"$work" -I"$top/proto" $(pkg-config --cflags libprotobuf-c) \
	"$here/gen_request_corpus.c" "$top/proto/client.c" \
	"$top/proto/frame.c" "$top/proto/clock.c" "$top/proto/errmsg.c" \
	"$work/squash.pb-c.c" \
	-o "$work/gen" $(pkg-config --libs libprotobuf-c) -lmunge
mkdir "$work/frames"
"$work/gen" "$work/frames"
cp "$work/frames"/* "$here/corpus/request/"
cp "$work/frames"/* "$here/corpus/frame/"
rm "$here/corpus/request/response_user_error"

# Superblocks: 96 bytes of superblock, then the file size (u64 LE) that
# fuzz_superblock reads after it.
mkdir -p "$work/tree/dir"
echo hello >"$work/tree/dir/file"
superblock_seed() { # NAME MKSQUASHFS-OPTIONS...
	seed=$1
	shift
	mksquashfs "$work/tree" "$work/$seed.sqfs" -noappend -quiet -no-progress \
		-mkfs-time 0 -all-time 0 -all-root \
		"$@" >/dev/null
	size=$(stat -c %s "$work/$seed.sqfs")
	head -c 96 "$work/$seed.sqfs" >"$here/corpus/superblock/$seed"
	python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<Q', $size))" \
		>>"$here/corpus/superblock/$seed"
}
for comp in gzip lzma lzo xz lz4 zstd; do
	superblock_seed "$comp" -comp "$comp"
done
# Optional tables absent, smallest and largest block sizes.
superblock_seed no_tables -no-fragments -no-exports -no-xattrs
superblock_seed block_4k -b 4K
superblock_seed block_1m -b 1M

# Option strings.
printf 'tools.sqfs' >"$here/corpus/imagespec/one"
printf '/home/alice/tools.sqfs:/squash/tools' >"$here/corpus/imagespec/target"
printf 'a.sqfs,b.squashfs:/squash/b,/x/c.sqsh,d.sfs' >"$here/corpus/imagespec/many"
printf 'img:' >"$here/corpus/imagespec/empty_target"
printf 'a,,b' >"$here/corpus/imagespec/empty_item"

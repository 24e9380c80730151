#!/bin/sh
# Regenerates the seed corpora under corpus/: valid request and response
# frames (from gen_request_corpus.c), superblocks of real mksquashfs images
# with every compressor, option strings, and small whole images for the
# reader. Needs cc, protoc-c, libprotobuf-c, libmunge and mksquashfs.
#
#   tests/fuzz/make_corpus.sh           all of them
#   tests/fuzz/make_corpus.sh reader    the reader's images only (mksquashfs)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Whole images for fuzz_reader, each a few KiB (-nopad: no 4 KiB padding;
# -b 4K: files of several blocks stay small): every compressor, fragments
# and not, uncompressed tables (which the fuzzer can mutate into
# meaningful variants), and the features the reader parses: xattrs inline
# and out of line, symlinks, a hard link, a FIFO, a sparse file, a long
# name, and a directory whose listing passes one metadata block, so it
# has an index.
reader_corpus() {
	rm -rf "$here/corpus/reader"
	mkdir -p "$here/corpus/reader" "$work/rt/d/e" "$work/rt/x" "$work/big"
	(
		cd "$work/rt"
		echo hello >small
		seq 1 1200 >text             # 5 KiB: a block and a tail
		head -c 4500 /dev/zero | tr '\0' 'z' >zeros
		truncate -s 40000 sparse
		printf x | dd of=sparse bs=1 seek=20000 conv=notrunc 2>/dev/null
		ln small hard
		ln -s small link
		ln -s ../../../../outside d/e/up
		mkfifo fifo
		echo deep >d/e/f
		: >"$(printf 'n%.0s' $(seq 1 255))"
		python3 -c "
import os
os.setxattr('small', 'user.one', b'1')
os.setxattr('small', 'user.shared', b'v' * 100)
os.setxattr('text', 'user.shared', b'v' * 100)
os.setxattr('d', 'user.dir', b'on a directory')
os.setxattr('x', 'user.empty', b'')
"
	)
	for i in $(seq 1 240); do : >"$work/big/entry-with-a-rather-longish-name-$i"; done
	reader_seed() { # NAME TREE MKSQUASHFS-OPTIONS...
		seed=$1 tree=$2
		shift 2
		mksquashfs "$tree" "$here/corpus/reader/$seed" -noappend -quiet -no-progress \
			-nopad -mkfs-time 0 -all-time 0 -b 4K "$@" >/dev/null
	}
	for comp in gzip lzma xz lzo lz4 zstd; do
		reader_seed "$comp" "$work/rt" -comp "$comp"
	done
	reader_seed gzip_no_fragments "$work/rt" -no-fragments
	reader_seed uncompressed "$work/rt" -noI -noD -noF -noX
	reader_seed uncompressed_no_xattrs_all_root "$work/rt" -noI -noD -noF -noX -no-xattrs -all-root
	# A start profile (daemon/reader/start_profile.h), uncompressed so
	# that mutations reach its text: good lines, a range past a file's
	# end, a path that leaves the tree, a directory, a missing file.
	mkdir -p "$work/prof/.squash" "$work/prof/lib"
	seq 1 3000 >"$work/prof/lib/a.so"
	echo small >"$work/prof/lib/b.py"
	printf '%s\n' '# squash start profile 1' '0 14000 lib/a.so' '0 99999 lib/b.py' \
		'0 10 ../x' '0 10 lib' '0 10 lib/none' >"$work/prof/.squash/start-profile"
	reader_seed start_profile "$work/prof" -noI -noD -noF -noX -no-xattrs
	reader_seed dir_index "$work/big" -comp zstd
	reader_seed dir_index_uncompressed "$work/big" -noI -noD -noF
}
if [ "${1:-}" = reader ]; then
	reader_corpus
	exit 0
fi

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

reader_corpus

#!/bin/sh
# Builds one libFuzzer harness with clang (ASan + UBSan) and runs it.
#
#   tests/fuzz/run.sh NAME [SECONDS]
#
# NAME is frame, request, imagespec, image_meta, superblock or reader; SECONDS defaults
# to 600. The harness is compiled from the proto/ sources and a squash.pb-c.c
# that protoc-c generates into a temporary directory (reader: from
# daemon/reader/'s image layer, with libsquashfuse and libzstd), and runs on a copy of
# corpus/NAME (the committed seeds stay as they are). Prints the number of
# executions; exits non-zero on a finding, whose reproducer is kept in
# $FUZZ_ARTIFACTS (default ./fuzz-artifacts/NAME/). FUZZ_KEEP_CORPUS=DIR
# keeps the grown corpus (and starts from it too when DIR exists, so that
# runs add up).
set -eu

name=${1:?usage: run.sh NAME [SECONDS]}
seconds=${2:-600}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
clang=${CLANG:-$(command -v clang-14 || command -v clang)}
artifacts=${FUZZ_ARTIFACTS:-$PWD/fuzz-artifacts/$name}

case $name in
frame | request | imagespec | image_meta | superblock | reader) ;;
*) echo "run.sh: unknown harness '$name' (frame, request, imagespec, image_meta, superblock, reader)" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

cflags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter"
if [ "$name" = reader ]; then
	# The image layer of squash-reader, as daemon/reader/Makefile.am builds
	# it (its own xz and legacy lzma decoders; its zstd one with libzstd).
	printf '#define _GNU_SOURCE 1\n' >"$work/config.h"
	reader=$top/daemon/reader
	srcs="$reader/image_meta.c $reader/image_dir.c $reader/image_data.c $reader/fragment_ahead.c $reader/data_ahead.c $reader/stored_files.c $reader/image_path.c $reader/image_xattr.c $reader/block_cache.c $reader/shared_data_cache.c
		$reader/block_codec.c $reader/squashfuse_block.c $reader/xz_block.c
		$reader/union_tree.c $reader/union_merge.c
		$reader/start_profile_record.c $reader/start_profile_prefetch.c $reader/start_profile_walk.c
		$reader/start_profile_learn.c $reader/start_profile_cache.c"
	libs="$(pkg-config --libs squashfuse liblzma) -pthread"
	if pkg-config --exists libzstd; then
		printf '#define HAVE_LIBZSTD 1\n' >>"$work/config.h"
		srcs="$srcs $reader/zstd_block.c"
		libs="$libs $(pkg-config --libs libzstd)"
	fi
	srcs="$srcs $top/proto/squashfs_format.c $top/proto/read_full.c $top/proto/errmsg.c $top/proto/profile_cache_path.c"
	# shellcheck disable=SC2086
	"$clang" $cflags -pthread -I"$work" -I"$top/daemon" -I"$top/proto" $(pkg-config --cflags squashfuse) \
		"$here/fuzz_reader.c" $srcs $libs -o "$work/fuzz_reader"
else
	protoc-c --proto_path="$top/proto" --c_out="$work" "$top/proto/squash.proto"
	# The sources include config.h; the fuzz build needs only this from it
	# (frame.c names the version in its mismatch message).
	printf '#define _GNU_SOURCE 1\n#define PACKAGE_VERSION "fuzz"\n' >"$work/config.h"

	# client.c is left out: it needs munged and sockets, not parsing.
	# shellcheck disable=SC2086
	"$clang" $cflags \
		-I"$work" -I"$top/proto" $(pkg-config --cflags libprotobuf-c) \
		"$here/fuzz_$name.c" \
		"$top/proto/clock.c" "$top/proto/errmsg.c" "$top/proto/frame.c" "$top/proto/imagespec.c" \
		"$top/proto/superblock.c" "$top/proto/squashfs_format.c" "$top/proto/read_full.c" \
		"$top/proto/target.c" "$top/proto/image_meta.c" "$top/proto/image_meta_env.c" \
		"$top/proto/image_meta_uenv.c" "$top/proto/json_value.c" "$top/proto/utf8_text.c" \
		"$top/proto/quote.c" "$top/proto/path_pattern.c" \
		"$top/proto/request_codec.c" "$work/squash.pb-c.c" \
		$(pkg-config --libs libprotobuf-c) -o "$work/fuzz_$name"
fi

mkdir -p "$work/corpus" "$artifacts"
cp "$here/corpus/$name"/* "$work/corpus/"
if [ -n "${FUZZ_KEEP_CORPUS:-}" ] && [ -d "$FUZZ_KEEP_CORPUS" ]; then
	cp -r "$FUZZ_KEEP_CORPUS"/. "$work/corpus/"
fi

status=0
"$work/fuzz_$name" -max_total_time="$seconds" -timeout=10 \
	-print_final_stats=1 -artifact_prefix="$artifacts/" \
	"$work/corpus" >"$work/log" 2>&1 || status=$?
tail -n 40 "$work/log"
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
echo "fuzz_$name: ${execs:-unknown} executions in ${seconds} s, exit status $status"
# The grown corpus, e.g. to replay it under valgrind, which sees inside the
# uninstrumented libprotobuf-c.
if [ -n "${FUZZ_KEEP_CORPUS:-}" ]; then
	mkdir -p "$FUZZ_KEEP_CORPUS"
	cp "$work/corpus"/* "$FUZZ_KEEP_CORPUS/"
fi
exit "$status"

#!/bin/sh
# Builds one libFuzzer harness with clang (ASan + UBSan) and runs it.
#
#   tests/fuzz/run.sh NAME [SECONDS]
#
# NAME is frame, request, imagespec or superblock; SECONDS defaults to 600.
# The harness is compiled from the proto/ sources and a squash.pb-c.c that
# protoc-c generates into a temporary directory, and runs on a copy of
# corpus/NAME (the committed seeds stay as they are). Prints the number of
# executions; exits non-zero on a finding, whose reproducer is kept in
# $FUZZ_ARTIFACTS (default ./fuzz-artifacts/NAME/). FUZZ_KEEP_CORPUS=DIR
# keeps the grown corpus.
set -eu

name=${1:?usage: run.sh NAME [SECONDS]}
seconds=${2:-600}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
clang=${CLANG:-$(command -v clang-14 || command -v clang)}
artifacts=${FUZZ_ARTIFACTS:-$PWD/fuzz-artifacts/$name}

case $name in
frame | request | imagespec | superblock) ;;
*) echo "run.sh: unknown harness '$name' (frame, request, imagespec, superblock)" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

protoc-c --proto_path="$top/proto" --c_out="$work" "$top/proto/squash.proto"
# The sources include config.h; the fuzz build needs only this from it.
printf '#define _GNU_SOURCE 1\n' >"$work/config.h"

# client.c is left out: it needs munged and sockets, not parsing.
"$clang" -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer \
	-Wall -Wextra -Wno-unused-parameter \
	-I"$work" -I"$top/proto" $(pkg-config --cflags libprotobuf-c) \
	"$here/fuzz_$name.c" \
	"$top/proto/clock.c" "$top/proto/errmsg.c" "$top/proto/frame.c" "$top/proto/imagespec.c" \
	"$top/proto/superblock.c" "$top/proto/target.c" \
	"$top/proto/quote.c" "$top/proto/path_pattern.c" \
	"$top/proto/request_codec.c" "$work/squash.pb-c.c" \
	$(pkg-config --libs libprotobuf-c) -o "$work/fuzz_$name"

mkdir -p "$work/corpus" "$artifacts"
cp "$here/corpus/$name"/* "$work/corpus/"

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

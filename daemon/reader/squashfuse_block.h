/* libsquashfuse's decoders, for the compressions squash-reader has no
 * decoder of its own for (gzip, lzo, lz4; zstd without libzstd). Reached
 * through libsquashfuse's own header (squashfuse_block.c), so that the
 * compiler checks every call against the library's declaration. None of
 * these allocates memory that depends on the input: zlib's inflate state
 * and window are fixed (about 44 KiB at most), lzo1x_decompress_safe and
 * LZ4_decompress_safe allocate nothing, and a one-shot ZSTD_decompress
 * only a context of fixed size (no window buffer). */
#ifndef SQUASH_READER_SQUASHFUSE_BLOCK_H
#define SQUASH_READER_SQUASHFUSE_BLOCK_H

#include <stdbool.h>
#include <stddef.h>

/* Whether libsquashfuse decodes this squashfs compression id. */
bool squashfuse_block_supports(int compression);

/* Decompresses one block of that compression into out, writing at most
 * *outsz bytes; on success *outsz is the bytes written. 0 or -1. */
int squashfuse_block_decompress(int compression, void *in, size_t insz, void *out,
				size_t *outsz);

#endif

/* The decoder squash-reader uses for an image's compression, chosen once
 * at image_open. Its own where libsquashfuse's would run without a bound
 * or slowly: xz and legacy lzma under a memory limit derived from the
 * block size (xz_block.h), zstd with a context per thread (zstd_block.h,
 * when built with libzstd); libsquashfuse's for the rest
 * (squashfuse_block.h), whose memory does not depend on the input. Every
 * prototype is the compiler's to check: the project's own headers here,
 * libsquashfuse's own header in squashfuse_block.c (docs/security.md,
 * "The reader's decoders"). */
#ifndef SQUASH_READER_BLOCK_CODEC_H
#define SQUASH_READER_BLOCK_CODEC_H

#include <stddef.h>
#include <stdint.h>

struct block_codec {
	uint16_t compression; /* enum squash_compression */
	uint64_t memlimit;    /* for liblzma's decoders */
};

/* 0, or -1 when this build cannot decode the compression. */
int block_codec_init(struct block_codec *codec, uint16_t compression, uint32_t block_size);

/* Decompresses one block into out, writing at most *outsz bytes; on
 * success *outsz is the bytes written. The input is the image's, hostile:
 * anything wrong is -1, with nothing beyond *outsz touched. 0 or -1.
 * Thread-safe. */
int block_codec_decompress(const struct block_codec *codec, void *in, size_t insz, void *out,
			   size_t *outsz);

#endif

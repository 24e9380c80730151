/* squash-reader's decoders for liblzma's two formats, xz and legacy lzma
 * (mksquashfs -comp lzma: an .lzma "alone" stream per block), each under a
 * memory limit. libsquashfuse's run with none (xz: UINT64_MAX) or a fixed
 * one (legacy lzma, 0.5: 32 MiB): a block whose header claims a dictionary
 * of 1.5 GiB (both formats allow up to 4 GiB) makes the decoder allocate
 * that much, in a process that serves all of a user's mounts. mksquashfs
 * never writes a dictionary larger than the block size (-Xdict-size is at
 * most -b; lzma uses the block size), so the limit is derived from it
 * (xz_block_memlimit). */
#ifndef SQUASH_READER_XZ_BLOCK_H
#define SQUASH_READER_XZ_BLOCK_H

#include <stddef.h>
#include <stdint.h>

/* The memory an image of block_size may make one decoder use: a
 * dictionary of the block size and the decoder's own state (about 64 KiB
 * for LZMA2, 28 KiB for LZMA1, a few KiB per BCJ filter), with room to
 * spare. */
uint64_t xz_block_memlimit(uint32_t block_size);

/* Decompresses one squashfs block (an xz stream of insz bytes) into out,
 * writing at most *outsz bytes; on success *outsz is the bytes written.
 * A stream needing more than memlimit bytes of decoder, one that does not
 * fit in *outsz or holds no data, anything damaged: -1, with nothing
 * beyond *outsz touched. 0 or -1. Thread-safe. */
int xz_block_decompress(void *in, size_t insz, void *out, size_t *outsz, uint64_t memlimit);

/* The same for a legacy lzma block (an .lzma stream: 5 bytes of
 * properties, the 64-bit uncompressed size or -1, then the data). */
int lzma_block_decompress(void *in, size_t insz, void *out, size_t *outsz, uint64_t memlimit);

#endif

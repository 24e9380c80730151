/* squash-reader's xz decompressor: liblzma under a memory limit.
 * libsquashfuse's runs with none (UINT64_MAX): an image whose blocks claim
 * a dictionary of 1.5 GiB (the xz format allows up to 4 GiB) makes every
 * decoder allocate that much, in a process that serves all of a user's
 * mounts. mksquashfs never writes a dictionary larger than the block size
 * (-Xdict-size is at most -b), so the reader's limit is derived from it
 * (xz_block_memlimit). */
#ifndef SQUASH_READER_XZ_BLOCK_H
#define SQUASH_READER_XZ_BLOCK_H

#include <stddef.h>
#include <stdint.h>

/* The memory an image of block_size may make one decoder use: a
 * dictionary of the block size and the decoder's own state (about 64 KiB
 * for LZMA2, a few KiB per BCJ filter), with room to spare. */
uint64_t xz_block_memlimit(uint32_t block_size);

/* Decompresses one squashfs block (an xz stream of insz bytes) into out,
 * writing at most *outsz bytes; on success *outsz is the bytes written.
 * A stream needing more than memlimit bytes of decoder, one that does not
 * fit in *outsz or holds no data, anything damaged: -1, with nothing
 * beyond *outsz touched. 0 (libsquashfuse's SQFS_OK) or -1. Thread-safe. */
int xz_block_decompress(void *in, size_t insz, void *out, size_t *outsz, uint64_t memlimit);

#endif

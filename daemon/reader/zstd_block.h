/* squash-reader's zstd decompressor: libzstd with one decompression
 * context per reader thread. libsquashfuse's (ZSTD_decompress) makes and
 * frees a context, about 94 KiB, for every block: with the reader's
 * mallopt (block buffers mmapped, main.c) that is an mmap, page faults and
 * an munmap per block, a third of the time a 128 KiB data block takes. */
#ifndef SQUASH_READER_ZSTD_BLOCK_H
#define SQUASH_READER_ZSTD_BLOCK_H

#include <stddef.h>

/* Decompresses one squashfs block (a zstd frame of insz bytes) into out,
 * writing at most *outsz bytes; on success *outsz is the bytes written.
 * The input is the image's, hostile: anything wrong, a frame that would
 * not fit in *outsz and one that holds no data included, is an error
 * with nothing beyond *outsz touched. 0 or -1. Thread-safe: the calling
 * thread's context, made on first use and freed when the thread exits. */
int zstd_block_decompress(void *in, size_t insz, void *out, size_t *outsz);

#endif

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

/* Makes the thread-specific key the contexts hang on; 0 or an errno
 * (EAGAIN: the process has PTHREAD_KEYS_MAX keys already). Done on the
 * first decompression otherwise, and a key that cannot be made then fails
 * every zstd block for good: the reader calls this before it opens any
 * FUSE session, since libfuse takes one key per session (serve.c). */
int zstd_block_init(void);

#endif

/* squash-reader's data blocks of a large file decompressed ahead of a
 * reader going through the file (data_ahead.c). Part of the image layer:
 * image_data.c notes its reads and waits here, the serving threads give
 * it their time after an answer (image.h, image_work_ahead). */
#ifndef SQUASH_READER_DATA_AHEAD_H
#define SQUASH_READER_DATA_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

struct image;
struct inode;
struct block_index;

/* A read of in's blocks first..last ended with bi at block last + 1
 * (nblocks: the blocks of its block list). After a read that goes on
 * from the one before it in the same file, asks for block last + 2: the
 * kernel's read-ahead asks for last + 1 next, on another thread. */
void data_ahead_note(struct image *img, const struct inode *in, uint64_t first, uint64_t last,
		     uint64_t nblocks, const struct block_index *bi);

/* Decompresses the block asked for into the data cache, if any. */
void data_ahead_work(struct image *img);

/* A read is about to decompress the block with cache key key: waits
 * while a decompression of it ahead is under way (it is then cached).
 * Returns whether it waited. */
bool data_ahead_wait(struct image *img, uint64_t key);

#endif

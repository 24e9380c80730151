/* squash-reader's fragment blocks decompressed ahead of a reader that goes
 * through them in order (fragment_ahead.c). Part of the image layer:
 * image_data.c takes from it, image_meta.c makes and ends it, and the
 * serving threads give it their time after an answer (image.h,
 * image_work_ahead, in image_data.c). */
#ifndef SQUASH_READER_FRAGMENT_AHEAD_H
#define SQUASH_READER_FRAGMENT_AHEAD_H

#include <stdint.h>

struct image;
struct cached_block;

void fragment_ahead_init(struct image *img);
void fragment_ahead_destroy(struct image *img);

/* A read needs fragment block idx (at pos, header word hdr): the block if
 * it was decompressed ahead, with one reference for the caller and now in
 * the data cache too, after waiting for a decompression of it under way;
 * NULL otherwise. Notes the read: going on to the next block asks for the
 * one after it. */
struct cached_block *fragment_ahead_take(struct image *img, uint32_t idx, uint64_t pos,
					 uint32_t hdr);

/* Decompresses the fragment block asked for and holds it, if any. */
void fragment_ahead_work(struct image *img);

#endif

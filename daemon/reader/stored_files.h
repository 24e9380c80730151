/* The small files of an image whose bytes squash-reader stored into the
 * kernel's page cache or answered whole (neighbour_push.h), a bit per
 * inode number, so that a file is stored once and not at every open.
 * Mapped at the first bit set: only the pages of the bits set cost
 * memory (one page per 32,768 inodes). Advice only: pages the kernel
 * drops later are asked for with a READ, as without it. */
#ifndef SQUASH_READER_STORED_FILES_H
#define SQUASH_READER_STORED_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct image;
struct inode;

/* Sets in's bit; whether it was set already (true also where no record
 * can be made: then nothing is stored). */
bool stored_test_and_set(struct image *img, const struct inode *in);

/* file was read whole from its start: its pages are the kernel's. */
void stored_note_read(struct image *img, const struct inode *file, uint64_t off, size_t size);

/* Unmaps img's record (image_close). */
void stored_forget(struct image *img);

#endif

/* Files of an image found by their path, without a mount: the start
 * profile the reader reads ahead (start_profile_prefetch.c) and
 * `squash-reader --cat`, which squash-images inspect runs to show an
 * image's /.squash/meta. */
#ifndef SQUASH_READER_IMAGE_PATH_H
#define SQUASH_READER_IMAGE_PATH_H

#include <stdbool.h>
#include <stdio.h>

#include "reader/image.h"

/* Whether path is relative, without empty, "." or ".." components or a
 * trailing '/', and each name fits a squashfs entry. */
bool image_path_valid(const char *path);

/* The inode at path (image_path_valid) from the image's root: 0, or
 * -ENOENT, -ENOTDIR, -EINVAL (an invalid path) or the image's error. */
int image_path_resolve(struct image *img, const char *path, struct inode *in);

/* Writes the regular file in to out: 0, or a negative errno (-EIO when
 * out fails). */
int image_file_write(struct image *img, const struct inode *in, FILE *out);

#endif

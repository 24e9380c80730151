/* Opening a test's image and finding its top-level files, for the
 * reader's unit tests that drive the image layer directly. */
#ifndef SQUASH_TESTS_READER_TEST_IMAGE_H
#define SQUASH_TESTS_READER_TEST_IMAGE_H

#include "reader/image.h"

/* dir/img.sqfs opened, or NULL (why on stderr): the caller checks it. */
struct image *reader_test_open(const char *dir);

/* Closes it and its descriptor. */
void reader_test_close(struct image *im);

/* The inode of the top-level entry name: 0 or the image's error. */
int reader_test_lookup(struct image *im, const char *name, struct inode *in);

#endif

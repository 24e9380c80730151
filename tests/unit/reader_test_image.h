/* Making a test's image, opening it, finding its top-level files and
 * reading it from several threads, for the reader's unit tests that drive
 * the image layer directly. The helpers check nothing themselves (each
 * test counts its own checks): they return, the test checks. */
#ifndef SQUASH_TESTS_READER_TEST_IMAGE_H
#define SQUASH_TESTS_READER_TEST_IMAGE_H

#include "reader/image.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether mksquashfs is installed (the tests skip without it). */
bool reader_test_have_mksquashfs(void);

/* A new directory NAME.XXXXXX into dir (len bytes), then the shell
 * commands of fmt run in it (set -e), which make src/ and img.sqfs: 0, or
 * -1. */
int reader_test_make(char *dir, size_t len, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Removes what reader_test_make made. */
void reader_test_remove(const char *dir);

/* Runs fn on each of the n arguments at args (size bytes apart) on a
 * thread of its own and waits for them all: 0, or -1 when one could not
 * start (those started are waited for). */
int reader_test_threads(unsigned n, void *(*fn)(void *), void *args, size_t size);

/* dir/img.sqfs opened, or NULL (why on stderr): the caller checks it. */
struct image *reader_test_open(const char *dir);

/* Closes it and its descriptor. */
void reader_test_close(struct image *im);

/* The inode of the top-level entry name: 0 or the image's error. */
int reader_test_lookup(struct image *im, const char *name, struct inode *in);

/* Whether the top-level file name reads, from offset 0, as exactly bytes
 * bytes of fill (file_read's reply, as the reader answers a READ). */
bool reader_test_reads_filled(struct image *im, const char *name, size_t bytes, int fill);

#endif

/* One file of an image read without mounting it: `squash-reader --cat
 * IMAGE PATH` (the project's one squashfs parser, every compressor
 * included, no squashfs-tools needed), run in a process of its own as the
 * caller, its output bounded to SQUASH_READER_CAT_MAX bytes and its time
 * to SQUASH_READER_CAT_TIMEOUT_S: the image may be anyone's bytes. For
 * squash-images inspect and publish. $SQUASH_READER names another reader
 * (the build tree's, in tests), as for squash-pack. */
#ifndef SQUASH_CLI_READER_CAT_H
#define SQUASH_CLI_READER_CAT_H

#include <stdbool.h>
#include <stddef.h>

#include "image_meta.h"

/* Seconds the reader may take (a hostile image, or one on a hung file
 * system, cannot hold the caller). */
#define SQUASH_READER_CAT_TIMEOUT_S 30
/* Bytes of output kept: a metadata file's most. */
#define SQUASH_READER_CAT_MAX SQUASH_META_MAX_BYTES
#define SQUASH_READER_CAT_STDERR_KEEP 1024

/* squash-reader --cat's exit statuses past 0 (squash-reader(8)). */
enum {
	SQUASH_READER_CAT_FAILED = 1,      /* the image, or the file in it, is at fault */
	SQUASH_READER_CAT_NO_FILE = 3,     /* the image has no such file */
	SQUASH_READER_CAT_NOT_REGULAR = 4, /* it is there, but not a regular file */
};

/* What the reader printed and how it ended. */
struct reader_cat_result {
	char *out; /* out_max + 1 bytes, the caller's */
	size_t out_max; /* bytes kept; 0: SQUASH_READER_CAT_MAX */
	size_t out_len;
	char errtext[SQUASH_READER_CAT_STDERR_KEEP];
	size_t err_len;
	int status; /* waitpid's */
	bool too_long, timed_out;
};

/* The reader that is run. */
const char *reader_cat_program(void);

/* Runs the reader on image (an argument that cannot be taken for an
 * option) for inner, the path of a file in the image, into r (r->out
 * given). image_fd >= 0: the image is that open descriptor instead, and
 * when the caller is root the reader runs as nobody. 0, or -1 with err
 * when the reader could not be started. */
int reader_cat_run(const char *image, int image_fd, const char *inner, struct reader_cat_result *r,
		   char *err, size_t errlen);

/* The reader's first line of complaint, for messages (cuts text). */
const char *reader_cat_first_line(char *text);

#endif

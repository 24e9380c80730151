/* A catalog of named, versioned images (docs/admin.md, "Catalog images"):
 * a directory holding the images and one index file, read in one go (no
 * directory walk: cheap on parallel file systems). The index, UTF-8 text,
 * one image a line, '#' comments and blank lines ignored, fields separated
 * by spaces or tabs, the description the rest of the line:
 *
 *     NAME  VERSION  FILE  [DESCRIPTION]
 *
 * NAME and VERSION: [A-Za-z0-9._+-]{1,64}, not starting with '.'. FILE:
 * relative to the catalog directory, no '..' or '.' component, no leading
 * '/', no white space or control character. A NAME/VERSION appears once.
 * Whatever breaks these rules is an error naming the file and the line:
 * never a silent skip. Sizes are bounded before anything is allocated. */
#ifndef SQUASH_CATALOG_INDEX_H
#define SQUASH_CATALOG_INDEX_H

#include <stdbool.h>
#include <stddef.h>

#define SQUASH_CATALOG_INDEX_FILE "index.tsv"
#define SQUASH_CATALOG_NAME_MAX 64
#define SQUASH_CATALOG_INDEX_MAX (4u << 20)  /* bytes of an index */
#define SQUASH_CATALOG_LINE_MAX 4096         /* bytes of one line */
#define SQUASH_CATALOG_ENTRIES_MAX 20000     /* images of one catalog */

struct squash_catalog_entry {
	char name[SQUASH_CATALOG_NAME_MAX + 1];
	char version[SQUASH_CATALOG_NAME_MAX + 1];
	char *file;        /* relative to the catalog directory */
	char *description; /* "" when none */
	unsigned line;     /* in the index, for messages */
};

struct squash_catalog_index {
	size_t count;
	struct squash_catalog_entry *entries;
};

/* Whether s is a valid NAME or VERSION; when not, why in err (what names
 * the field: "name" or "version"). */
bool squash_catalog_name_ok(const char *s, const char *what, char *err, size_t errlen);

/* Whether file is a valid FILE field (see above); when not, why in err. */
bool squash_catalog_file_ok(const char *file, char *err, size_t errlen);

/* Orders versions like `sort -V`: runs of digits compare as numbers, the
 * rest character by character, '~' before anything (even the end), letters
 * before other characters; equal versions ("1.0", "1.00") by strcmp.
 * Returns <0, 0 or >0. */
int squash_catalog_version_cmp(const char *a, const char *b);

/* Parses text[0..len) of the index file at path (named in messages) into
 * out (zeroed first). Returns 0, or -1 with "PATH:LINE: what is wrong" in
 * err. */
int squash_catalog_index_parse(const char *text, size_t len, const char *path,
			       struct squash_catalog_index *out, char *err, size_t errlen);

/* Reads and parses the index at path (at most SQUASH_CATALOG_INDEX_MAX
 * bytes, a regular file). fd_check, when not NULL, is called on the open
 * descriptor first (the site's trust rule) and may refuse it with -1 and
 * err. Returns 0, 1 when the file does not exist (out empty), or -1 with
 * err. */
int squash_catalog_index_read(const char *path, int (*fd_check)(int fd, const char *path,
								 char *err, size_t errlen),
			      struct squash_catalog_index *out, char *err, size_t errlen);

void squash_catalog_index_free(struct squash_catalog_index *index);

/* The entry NAME/VERSION, or with version NULL the newest of NAME; NULL
 * when there is none. */
const struct squash_catalog_entry *squash_catalog_index_find(const struct squash_catalog_index *index,
							     const char *name, const char *version);

/* One index line for entry (fields separated by a tab, ending in '\n'),
 * malloc'd; NULL when out of memory. */
char *squash_catalog_index_line(const struct squash_catalog_entry *entry);

#endif

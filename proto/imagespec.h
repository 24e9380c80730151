/* The --squash-image option syntax, defined once for the plugin, the daemon
 * and the tests:
 *
 *     IMAGE[:TARGET[:rw[=DIR]]][,IMAGE[:TARGET[:rw[=DIR]]]...]
 *
 * A third field "rw" asks for a writable overlay (discarded at the job's
 * end) at the target, "rw=DIR" for one whose changes are kept in the
 * user's directory DIR (a path, escaped like the others); "IMAGE::rw"
 * keeps the default target.
 * IMAGE and TARGET are paths. Inside a path, '\,' stands for ',', '\:' for
 * ':' and '\\' for '\'; any other backslash is an error, so that text means
 * one thing only. Paths may not hold control characters. At most
 * SQUASH_MAX_IMAGES images, each path at most SQUASH_PATH_MAX-1 bytes (after
 * unescaping), the whole text at most SQUASH_OPTION_MAX bytes. Items with
 * the same TARGET are merged there (target.h). A missing TARGET stays NULL; squash_default_target() derives
 * it. squash_imagespec_format() writes the escapes back, so its text parses
 * to the same list. */
#ifndef SQUASH_IMAGESPEC_H
#define SQUASH_IMAGESPEC_H

#include <stdbool.h>
#include <stddef.h>

/* Images per job (a dataset of up to 1,024 bundles, docs/user.md
 * "Datasets"); squashd.conf's max_images_per_job may set fewer. */
#define SQUASH_MAX_IMAGES 1024
#define SQUASH_PATH_MAX 4096
/* The option's text, and the canonical list made of it at submission
 * (escaped, absolute paths), at most this long: tasks get the list in one
 * environment variable, which the kernel takes up to 128 KiB
 * (MAX_ARG_STRLEN), and a request with all of it fits one frame
 * (request_codec.c). */
#define SQUASH_OPTION_MAX (96 * 1024)
/* Fields of one item, separated by ':' (IMAGE, TARGET, and room for more). */
#define SQUASH_SPEC_MAX_FIELDS 4
/* squashd's node-level mount points (STATE_DIR/mnt/mN) stay shorter than
 * this, so that answers naming them fit one frame (frame.h). */
#define SQUASH_MOUNT_DIR_MAX 512
/* An upper directory (":rw=DIR") is shorter than this, so that a request
 * with every image, target and DIR at its longest still fits one frame. */
#define SQUASH_UPPER_MAX 1024

struct squash_image_spec {
	char *image;  /* as written; may be relative before resolution */
	char *target; /* NULL when not given */
	bool writable; /* ":rw": an overlay with a node-local upper layer */
	char *upper;   /* ":rw=DIR": DIR (implies writable); NULL when not given */
};

struct squash_image_list {
	size_t count;
	struct squash_image_spec items[SQUASH_MAX_IMAGES];
};

/* Parses text into out (zeroed first). Returns 0, or -1 with a message for
 * the user in err, naming the offending item. Empty items, empty image or
 * target, too many images and too long paths are errors. */
int squash_imagespec_parse(const char *text, struct squash_image_list *out,
			   char *err, size_t errlen);

void squash_imagespec_free(struct squash_image_list *list);

/* Canonical text of the list: "image:target[:rw[=dir]],..." (targets that
 * are NULL are left out: "image", "image::rw"; ',' ':' and '\' in paths
 * escaped). Returns a malloc'd string,
 * or NULL when out of memory. */
char *squash_imagespec_format(const struct squash_image_list *list);

/* One item of the option split into its ':'-separated fields, still
 * escaped. Used by the parser; exposed so that tests and future fields
 * (flags after TARGET) share one splitter. */
struct squash_spec_fields {
	size_t count;
	struct {
		const char *text; /* points into the item */
		size_t len;
	} field[SQUASH_SPEC_MAX_FIELDS];
};

/* Splits item[0..len) at unescaped ':' into out. Returns 0, or -1 with err
 * when the item has a bad escape ('\' not followed by '\', ',' or ':') or
 * more than SQUASH_SPEC_MAX_FIELDS fields. index numbers the item (1-based)
 * in messages. */
int squash_spec_split(const char *item, size_t len, size_t index,
		      struct squash_spec_fields *out, char *err, size_t errlen);

/* Unescaped copy of an escaped field (malloc'd; NULL when out of memory). */
char *squash_spec_unescape(const char *text, size_t len);

/* Length of the unescaped text of an escaped field. */
size_t squash_spec_unescaped_len(const char *text, size_t len);

/* Default mount point of an image: BASE/NAME, where NAME is the image's file
 * name without a .sqfs, .squashfs, .sqsh or .sfs suffix. Returns 0, or -1
 * (with err) when the name would be empty or the result too long. */
int squash_default_target(const char *image, const char *base, char *out,
			  size_t outlen, char *err, size_t errlen);

#endif

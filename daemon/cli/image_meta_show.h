/* Showing an image's metadata (its /.squash/meta, proto/image_meta.h)
 * without mounting it: `squash-reader --cat IMAGE .squash/meta` run as the
 * caller, bounded in output (the 64 KiB a metadata file may have) and time
 * (reader_cat.h), then parsed like the tasks parse it. For `squash-images
 * inspect` and publish. */
#ifndef SQUASH_CLI_IMAGE_META_SHOW_H
#define SQUASH_CLI_IMAGE_META_SHOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Writes image_path's metadata to out, for squash-images inspect: a
 * "metadata" heading, then indented "key: value" lines and each
 * environment's lines as the file writes them; or (json) the value of
 * inspect's "metadata" member: one object with every key (null when the
 * file does not give it) and "environments": {NAME: [{"op", "var",
 * "value"}...]}, or null for an image without metadata. Nothing is written
 * when it fails. Returns 0 with *found (whether the image has metadata),
 * or -1 with err (the reader missing or failing, metadata that does not
 * parse: its line). */
int squash_image_meta_show(const char *image_path, bool json, FILE *out, bool *found, char *err,
			   size_t errlen);

/* Reads and parses image_path's metadata the same way (image_fd >= 0:
 * from that open descriptor instead, image_path naming it in messages;
 * then, when the caller is root, read as nobody). 0 with *found false
 * (no /.squash/meta) or true (meta filled: free it with
 * squash_image_meta_free); -2 with err when the image's metadata is at
 * fault (does not parse, too long, not a regular file: every job using
 * the image would fail on it); -1 with err when it cannot be read here
 * (no squash-reader, out of time). */
struct squash_image_meta;
int squash_image_meta_read(const char *image_path, int image_fd, struct squash_image_meta *meta,
			   bool *found, char *err, size_t errlen);

#endif

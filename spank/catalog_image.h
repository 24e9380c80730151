/* Catalog images at submission (proto/catalog.h): "@NAME[/VERSION]" in
 * --squash-image replaced by the image's file, and the words for a missing
 * image that was meant as a catalog name. The catalogs are read once per
 * submission, on the first need, as the user, and kept until
 * submit_catalogs_done() (the submitting command checks one list at a
 * time). */
#ifndef SPANK_SQUASH_CATALOG_IMAGE_H
#define SPANK_SQUASH_CATALOG_IMAGE_H

#include <stdbool.h>

#include "catalog.h"
#include "imagespec.h"

/* Replaces item->image ("@NAME[/VERSION]") by the catalog image's
 * absolute path and puts NAME (the default target's) in name. Returns 0,
 * or -1 after telling the user why (near matches for an unknown name). */
int submit_catalog_image(struct squash_image_spec *item, char name[SQUASH_CATALOG_NAME_MAX + 1]);

/* Tells the user why image cannot be resolved (errno e). For a path that
 * does not exist: an image is a file; when the catalogs hold NAME[/VERSION]
 * of that text, to write @ before it (and then nothing about escaping ','
 * or ':', which split_nearby would otherwise suggest). */
void submit_image_missing(const char *image, int e, bool split_nearby);

/* Frees what was read, if anything. */
void submit_catalogs_done(void);

#endif

/* Catalog images at submission (proto/catalog.h): "@NAME[/VERSION]" in
 * --squash-image replaced by the image's file, and the words for a missing
 * image that was meant as a catalog name. The catalogs are read once per
 * submission, on the first need, as the user. */
#ifndef SPANK_SQUASH_CATALOG_IMAGE_H
#define SPANK_SQUASH_CATALOG_IMAGE_H

#include <stdbool.h>

#include "catalog.h"
#include "imagespec.h"

struct submit_catalogs {
	bool loaded;
	struct squash_catalogs c;
};

/* Replaces item->image ("@NAME[/VERSION]") by the catalog image's
 * absolute path and puts NAME (the default target's) in name. Returns 0,
 * or -1 after telling the user why (near matches for an unknown name). */
int submit_catalog_image(struct squash_image_spec *item,
			 char name[SQUASH_CATALOG_NAME_MAX + 1], struct submit_catalogs *sc);

/* Tells the user that image, a path that does not exist, is missing: an
 * image is a file; when the catalogs hold NAME[/VERSION] of that text, to
 * write @ before it (and then nothing about escaping ',' or ':'). */
void submit_explain_missing(const char *image, bool split_nearby, struct submit_catalogs *sc);

/* Frees what was read (sc may be unused). */
void submit_catalogs_done(struct submit_catalogs *sc);

#endif

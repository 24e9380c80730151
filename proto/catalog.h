/* Catalog references in --squash-image: "@NAME" (the newest version) or
 * "@NAME/VERSION", resolved at submission to the image's file (so a later
 * publish changes no queued or running job). The site's catalogs are
 * searched first, then the user's (catalog_sites.h); an index that cannot
 * be read stops the search with its error, a site catalog that is not
 * trusted is skipped (the caller shows why). Unknown names get near
 * matches; a path typed the way uenv users name images gets the '@'
 * suggested. */
#ifndef SQUASH_CATALOG_H
#define SQUASH_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog_sites.h"

/* Whether an --squash-image IMAGE field names a catalog image. */
static inline bool squash_catalog_is_ref(const char *image)
{
	return image && image[0] == '@';
}

/* What a refusal of "@NAME[/VERSION][:TARGET]" adds when it was written the
 * way uenv names images (NAME/VERSION:TAG@SYSTEM): this form has neither. */
#define SQUASH_CATALOG_NO_TAGS_HINT \
	"(no systems or tags here: write @NAME/VERSION, optionally :/TARGET)"

/* Splits NAME[/VERSION] (without the '@') into name and version ("" when
 * omitted), checked. -1 with err (why, not the form: callers name theirs). */
int squash_catalog_ref_parse(const char *ref, char name[SQUASH_CATALOG_NAME_MAX + 1],
			     char version[SQUASH_CATALOG_NAME_MAX + 1], char *err, size_t errlen);

/* squash_catalog_ref_parse of "@NAME[/VERSION]" (ref with its '@'); err
 * ends with the form to write, or SQUASH_CATALOG_NO_TAGS_HINT when ref holds
 * another '@' (a uenv system). */
int squash_catalog_at_ref_parse(const char *ref, char name[SQUASH_CATALOG_NAME_MAX + 1],
				char version[SQUASH_CATALOG_NAME_MAX + 1], char *err, size_t errlen);

/* What a refusal of a catalog image's TARGET adds: " " and
 * SQUASH_CATALOG_NO_TAGS_HINT when target is not absolute (a uenv tag, as
 * in @NAME/VERSION:v1), else "". */
const char *squash_catalog_target_hint(const char *target);

/* The entry for name and version ("" or NULL: the newest) and its catalog
 * (*where), searched in order; NULL with err (near matches, or the
 * unreadable index that stopped the search). */
const struct squash_catalog_entry *squash_catalogs_find(const struct squash_catalogs *c,
							const char *name, const char *version,
							const struct squash_catalog **where,
							char *err, size_t errlen);

/* The absolute path of e in catalog c into out; for a site catalog the
 * file must be trusted like the catalog (catalog_sites.h). -1 with err. */
int squash_catalog_entry_path(const struct squash_catalog *c, const struct squash_catalog_entry *e,
			      char *out, size_t outlen, char *err, size_t errlen);

/* "@NAME[/VERSION]" to the image's absolute path. -1 with err (which names
 * the reference). */
int squash_catalogs_resolve(const struct squash_catalogs *c, const char *ref, char *out,
			    size_t outlen, char *err, size_t errlen);

/* Up to max names near text (same letters but for a few edits, or one
 * holding the other, case aside), written "@NAME, @NAME2" into out; the
 * count. */
size_t squash_catalogs_near(const struct squash_catalogs *c, const char *text, size_t max,
			    char *out, size_t outlen);

/* Whether image, a path that does not exist, reads as NAME or NAME/VERSION
 * of a catalog image (the '@' forgotten). */
bool squash_catalogs_knows_path(const struct squash_catalogs *c, const char *image);

/* Whether image, a path, has the shape of NAME or NAME/VERSION (relative,
 * a valid name): worth reading the catalogs for when it does not exist. */
bool squash_catalog_name_shaped(const char *image);

/* For a user who may have named an image the way other tools do (uenv's
 * NAME/VERSION): what to add to "IMAGE: No such file or directory" into
 * out. When c holds that image: ": an image is a file; the catalog image of
 * that name is written @IMAGE", and true; else, when image has the shape,
 * " (an image is a file, given by its path; a catalog image is written
 * @NAME or @NAME/VERSION)"; else "". c may be NULL (not read: the shape
 * alone). One text for the plugin, squash-images and squash-shell. */
bool squash_catalog_missing_hint(const struct squash_catalogs *c, const char *image, char *out,
				 size_t outlen);

#endif

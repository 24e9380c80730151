/* Catalog images at submission (see catalog_image.h). */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <slurm/spank.h>

#include "catalog_image.h"

/* The catalogs of sc, read now if they were not; NULL when out of memory.
 * A site catalog that is not trusted is skipped: said once, here. */
static const struct squash_catalogs *catalogs(struct submit_catalogs *sc)
{
	if (sc->loaded)
		return &sc->c;
	if (squash_catalogs_load(NULL, true, &sc->c)) {
		squash_catalogs_free(&sc->c);
		slurm_error("squash: out of memory reading the image catalogs");
		return NULL;
	}
	sc->loaded = true;
	if (sc->c.conf_problem)
		slurm_error("squash: %s", sc->c.conf_problem);
	for (size_t i = 0; i < sc->c.count; i++)
		if (sc->c.items[i].refused && sc->c.items[i].source == SQUASH_CATALOG_SITE)
			slurm_error("squash: %s", sc->c.items[i].problem);
	return &sc->c;
}

void submit_catalogs_done(struct submit_catalogs *sc)
{
	if (sc->loaded)
		squash_catalogs_free(&sc->c);
	sc->loaded = false;
}

int submit_catalog_image(struct squash_image_spec *item,
			 char name[SQUASH_CATALOG_NAME_MAX + 1], struct submit_catalogs *sc)
{
	const struct squash_catalogs *c = catalogs(sc);
	char path[PATH_MAX], why[4096], version[SQUASH_CATALOG_NAME_MAX + 1];
	struct stat file;
	char *copy;

	if (!c)
		return -1;
	if (squash_catalogs_resolve(c, item->image, path, sizeof path, why, sizeof why)) {
		/* Before catalogs, "@x.sqfs" named a file: say how to name it now. */
		slurm_error("squash: %s%s%s", why, lstat(item->image, &file) == 0 ? "; for the file "
			    "of that name write ./" : "", lstat(item->image, &file) == 0 ? item->image : "");
		return -1;
	}
	if (squash_catalog_ref_parse(item->image + 1, name, version, NULL, 0) ||
	    !(copy = strdup(path))) {
		slurm_error("squash: out of memory");
		return -1;
	}
	free(item->image);
	item->image = copy;
	return 0;
}

/* For a user who may have named an image the way other tools do (uenv's
 * NAME/VERSION). */
void submit_explain_missing(const char *image, bool split_nearby, struct submit_catalogs *sc)
{
	const struct squash_catalogs *c;
	char name[SQUASH_CATALOG_NAME_MAX + 1], version[SQUASH_CATALOG_NAME_MAX + 1];

	if (image[0] != '/' && !squash_catalog_ref_parse(image, name, version, NULL, 0) &&
	    (c = catalogs(sc)) && squash_catalogs_knows_path(c, image)) {
		slurm_error("squash: %s: no such file: an image is a file; for the catalog image of "
			    "that name write @%s", image, image);
		return;
	}
	slurm_error("squash: %s: no such file (an image is a file, given by its path; a catalog "
		    "image is written @NAME or @NAME/VERSION)%s", image, split_nearby
		    ? "; if ',' or ':' is part of the file name, write it as '\\,' or '\\:' in "
		      "--squash-image" : "");
}


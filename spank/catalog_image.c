/* Catalog images at submission (see catalog_image.h). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <slurm/spank.h>

#include "catalog_image.h"

/* What this submission read (catalog_image.h). */
static bool loaded;
static struct squash_catalogs catalogs_read;

/* The catalogs, read now if they were not; NULL when out of memory. A
 * site catalog that is not trusted is skipped: said once, here. */
static const struct squash_catalogs *catalogs(void)
{
	if (loaded)
		return &catalogs_read;
	if (squash_catalogs_load(NULL, true, &catalogs_read)) {
		squash_catalogs_free(&catalogs_read);
		slurm_error("squash: out of memory reading the image catalogs");
		return NULL;
	}
	loaded = true;
	if (catalogs_read.conf_problem)
		slurm_error("squash: %s", catalogs_read.conf_problem);
	for (size_t i = 0; i < catalogs_read.count; i++)
		if (catalogs_read.items[i].refused &&
		    catalogs_read.items[i].source == SQUASH_CATALOG_SITE)
			slurm_error("squash: %s", catalogs_read.items[i].problem);
	return &catalogs_read;
}

void submit_catalogs_done(void)
{
	if (loaded)
		squash_catalogs_free(&catalogs_read);
	loaded = false;
}

int submit_catalog_image(struct squash_image_spec *item, char name[SQUASH_CATALOG_NAME_MAX + 1])
{
	const struct squash_catalogs *c = catalogs();
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

/* The catalogs are read only for a relative path shaped like a catalog
 * name (squash_catalog_missing_hint). */
void submit_image_missing(const char *image, int e, bool split_nearby)
{
	char hint[512] = "";
	bool known = e == ENOENT && squash_catalog_name_shaped(image) &&
		     squash_catalog_missing_hint(catalogs(), image, hint, sizeof hint);

	slurm_error("squash: %s: %s%s%s", image, strerror(e), hint,
		    e == ENOENT && split_nearby && !known ? " (if ',' or ':' is part of the file "
		    "name, write it as '\\,' or '\\:' in --squash-image)" : "");
}

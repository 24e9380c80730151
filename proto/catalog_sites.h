/* Which catalogs a user sees (docs/admin.md, "Catalog images"): the site's,
 * named by the admin in one file that the plugin (on submit hosts too,
 * where squashd may not run) and squash-images both read,
 *
 *     /etc/squash-images.conf:   catalog DIR      (one line per catalog)
 *
 * and the user's own: $SQUASH_USER_CATALOG, or ~/.squash-images. Site
 * catalogs come first, in the file's order, so a user's name never shadows
 * the site's. The file, like squashd.conf, must be root's and writable by
 * nobody else; a site catalog is used only when its directory, its index
 * and every directory above them are root's and writable by nobody else
 * (a root-owned sticky directory above is fine): a catalog a user could
 * write is not the site's. Refusals are kept with the catalog (problem)
 * for the caller to show. */
#ifndef SQUASH_CATALOG_SITES_H
#define SQUASH_CATALOG_SITES_H

#include <stdbool.h>
#include <stddef.h>

#include "catalog_index.h"

#define SQUASH_CATALOG_CONF "/etc/squash-images.conf"
#define SQUASH_CATALOG_CONF_MAX (64u << 10)
#define SQUASH_CATALOG_USER_ENV "SQUASH_USER_CATALOG"
#define SQUASH_CATALOG_USER_DEFAULT ".squash-images" /* below $HOME */
#define SQUASH_CATALOG_SITES_MAX 16

enum squash_catalog_source {
	SQUASH_CATALOG_SITE,
	SQUASH_CATALOG_USER,
};

struct squash_catalog {
	enum squash_catalog_source source;
	char *dir;      /* as configured (site) or found (user) */
	char *real_dir; /* its real path (site), what files are read below; NULL: unusable */
	struct squash_catalog_index index;
	bool missing;   /* the user's catalog has no index yet: empty, not a problem */
	char *problem;  /* why it is not used (refused, unreadable, malformed); NULL: fine */
	bool refused;   /* the problem is distrust: skipped, not an error */
};

struct squash_catalogs {
	size_t count;
	struct squash_catalog items[SQUASH_CATALOG_SITES_MAX + 1];
	char *conf_problem; /* the site file was refused or malformed: no site catalogs */
};

/* Reads the site file conf (NULL: SQUASH_CATALOG_CONF; a missing file
 * means no site catalogs), checks and reads each site catalog, then the
 * user's. Problems are recorded, not returned: -1 only when out of memory.
 * with_user: false leaves the user's catalog out (nothing of the caller's
 * environment is read then). */
int squash_catalogs_load(const char *conf, bool with_user, struct squash_catalogs *out);

void squash_catalogs_free(struct squash_catalogs *c);

/* The user's catalog directory ($SQUASH_USER_CATALOG, else
 * $HOME/.squash-images, else from the password file) into out; -1 with
 * err when there is none or it is not absolute. */
int squash_catalog_user_dir(char *out, size_t outlen, char *err, size_t errlen);

/* Whether path (a directory, or a regular file when is_file), every
 * directory above it and, through symbolic links, what they lead to are
 * root's and writable by nobody else. -1 with the offending path in err. */
int squash_catalog_trusted(const char *path, bool is_file, char *err, size_t errlen);

/* Parses the site file's text into dirs (up to SQUASH_CATALOG_SITES_MAX,
 * malloc'd, *count set). -1 with "PATH:LINE: ..." in err. */
int squash_catalog_conf_parse(const char *text, size_t len, const char *path, char **dirs,
			      size_t *count, char *err, size_t errlen);

#endif

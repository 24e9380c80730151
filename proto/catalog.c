#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "catalog.h"
#include "errmsg.h"
#include "quote.h"

int squash_catalog_ref_parse(const char *ref, char name[SQUASH_CATALOG_NAME_MAX + 1],
			     char version[SQUASH_CATALOG_NAME_MAX + 1], char *err, size_t errlen)
{
	const char *slash = strchr(ref, '/');
	size_t nlen = slash ? (size_t)(slash - ref) : strlen(ref);

	name[0] = version[0] = '\0';
	if (nlen > SQUASH_CATALOG_NAME_MAX || (slash && strlen(slash + 1) > SQUASH_CATALOG_NAME_MAX)) {
		squash_errf(err, errlen, "a catalog name and a version are at most %d characters each",
			    SQUASH_CATALOG_NAME_MAX);
		return -1;
	}
	memcpy(name, ref, nlen);
	name[nlen] = '\0';
	if (!squash_catalog_name_ok(name, "name", err, errlen) ||
	    (slash && !squash_catalog_name_ok(slash + 1, "version", err, errlen)))
		return -1;
	if (slash)
		strcpy(version, slash + 1);
	return 0;
}

int squash_catalog_at_ref_parse(const char *ref, char name[SQUASH_CATALOG_NAME_MAX + 1],
				char version[SQUASH_CATALOG_NAME_MAX + 1], char *err, size_t errlen)
{
	char why[512];

	if (squash_catalog_ref_parse(ref + 1, name, version, why, sizeof why) == 0)
		return 0;
	squash_errf(err, errlen, "%s %s", why, strchr(ref + 1, '@') ? SQUASH_CATALOG_NO_TAGS_HINT
				 : "(the form is @NAME or @NAME/VERSION)");
	return -1;
}

const char *squash_catalog_target_hint(const char *target)
{
	return target && target[0] != '/' ? " " SQUASH_CATALOG_NO_TAGS_HINT : "";
}

/* The versions of name in index, newest first, "a, b, c" into out. */
static void versions_of(const struct squash_catalog_index *index, const char *name, char *out,
			size_t outlen)
{
	const char *last = NULL;
	size_t used = 0;

	out[0] = '\0';
	for (;;) {
		const char *next = NULL;

		/* The next older version than last: a selection, no sort buffer. */
		for (size_t i = 0; i < index->count; i++) {
			const char *v = index->entries[i].version;

			if (strcmp(index->entries[i].name, name) ||
			    (last && squash_catalog_version_cmp(v, last) >= 0))
				continue;
			if (!next || squash_catalog_version_cmp(v, next) > 0)
				next = v;
		}
		if (!next || used + strlen(next) + 3 >= outlen)
			return;
		used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? ", " : "", next);
		last = next;
	}
}

/* The catalogs searched, "site /a, yours /b", for messages. */
static void catalogs_named(const struct squash_catalogs *c, char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < c->count && used < outlen; i++)
		if (!c->items[i].refused)
			used += (size_t)snprintf(out + used, outlen - used, "%s%s %s", used ? ", " : "",
						 c->items[i].source == SQUASH_CATALOG_SITE ? "site" : "yours",
						 c->items[i].dir);
	if (!out[0])
		snprintf(out, outlen, "none is set up: ask your administrator, or publish your own "
			 "with squash-images publish");
}

const struct squash_catalog_entry *squash_catalogs_find(const struct squash_catalogs *c,
							const char *name, const char *version,
							const struct squash_catalog **where,
							char *err, size_t errlen)
{
	char near[512], list[1024];

	if (version && !*version)
		version = NULL;
	for (size_t i = 0; i < c->count; i++) {
		const struct squash_catalog *cat = &c->items[i];
		const struct squash_catalog_entry *e;

		if (cat->refused)
			continue;
		if (cat->problem) {
			squash_errf(err, errlen, "%s", cat->problem);
			return NULL;
		}
		if ((e = squash_catalog_index_find(&cat->index, name, version))) {
			*where = cat;
			return e;
		}
		/* The name is this catalog's: a later one never supplies it. */
		if (version && squash_catalog_index_find(&cat->index, name, NULL)) {
			versions_of(&cat->index, name, list, sizeof list);
			squash_errf(err, errlen, "%s has no version %s in %s %s (its versions, newest "
				    "first: %s)", name, version, cat->source == SQUASH_CATALOG_SITE ?
				    "the site catalog" : "your catalog", cat->dir, list);
			return NULL;
		}
	}
	catalogs_named(c, list, sizeof list);
	if (squash_catalogs_near(c, name, 5, near, sizeof near))
		squash_errf(err, errlen, "no image named %s in the catalogs (%s); did you mean %s? "
			    "(squash-images list shows them all)", name, list, near);
	else
		squash_errf(err, errlen, "no image named %s in the catalogs (%s); squash-images list "
			    "shows them all", name, list);
	return NULL;
}

int squash_catalog_entry_path(const struct squash_catalog *c, const struct squash_catalog_entry *e,
			      char *out, size_t outlen, char *err, size_t errlen)
{
	char why[1024];

	if ((size_t)snprintf(out, outlen, "%s/%s", c->real_dir, e->file) >= outlen) {
		squash_errf(err, errlen, "%s/%s: the path is too long", c->real_dir, e->file);
		return -1;
	}
	if (c->source == SQUASH_CATALOG_SITE && squash_catalog_trusted(out, true, why, sizeof why)) {
		squash_errf(err, errlen, "%s/%s of the site catalog %s is not used: %s; tell your "
			    "administrator", e->name, e->version, c->dir, why);
		return -1;
	}
	return 0;
}

int squash_catalogs_resolve(const struct squash_catalogs *c, const char *ref, char *out,
			    size_t outlen, char *err, size_t errlen)
{
	char name[SQUASH_CATALOG_NAME_MAX + 1], version[SQUASH_CATALOG_NAME_MAX + 1];
	char why[2048], shown[SQUASH_QUOTE_BUF];
	const struct squash_catalog *where = NULL;
	const struct squash_catalog_entry *e;

	squash_quote(shown, sizeof shown, ref, strlen(ref));
	if (!squash_catalog_is_ref(ref) ||
	    squash_catalog_at_ref_parse(ref, name, version, why, sizeof why)) {
		squash_errf(err, errlen, "%s: %s", shown,
			    squash_catalog_is_ref(ref) ? why : "not a catalog name");
		return -1;
	}
	e = squash_catalogs_find(c, name, version, &where, why, sizeof why);
	if (!e || squash_catalog_entry_path(where, e, out, outlen, why, sizeof why)) {
		squash_errf(err, errlen, "%s: %s", shown, why);
		return -1;
	}
	return 0;
}

/* Edit distance of a and b (each at most SQUASH_CATALOG_NAME_MAX), case
 * aside. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[SQUASH_CATALOG_NAME_MAX + 2];

	if (la > SQUASH_CATALOG_NAME_MAX || lb > SQUASH_CATALOG_NAME_MAX)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			size_t best = diag + cost;

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static bool near(const char *text, const char *name)
{
	size_t lt = strlen(text), allowed = lt < 4 ? 1 : lt < 9 ? 2 : 3;

	if (lt >= 2 && (strcasestr(name, text) || strcasestr(text, name)))
		return true;
	return distance(text, name) <= allowed;
}

size_t squash_catalogs_near(const struct squash_catalogs *c, const char *text, size_t max,
			    char *out, size_t outlen)
{
	size_t found = 0, used = 0;

	out[0] = '\0';
	if (strlen(text) > SQUASH_CATALOG_NAME_MAX)
		return 0;
	for (size_t i = 0; i < c->count && found < max; i++) {
		const struct squash_catalog_index *index = &c->items[i].index;

		for (size_t k = 0; k < index->count && found < max; k++) {
			const char *name = index->entries[k].name;
			bool seen = false;
			char item[SQUASH_CATALOG_NAME_MAX + 4];

			if (!near(text, name))
				continue;
			snprintf(item, sizeof item, "@%s", name);
			/* Each name once, whichever catalogs and versions hold it. */
			for (const char *p = out; (p = strstr(p, item)); p += strlen(item))
				if ((p[strlen(item)] == ',' || !p[strlen(item)]) && (p == out || p[-1] == ' '))
					seen = true;
			if (seen || used + strlen(item) + 3 >= outlen)
				continue;
			used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? ", " : "", item);
			found++;
		}
	}
	return found;
}

bool squash_catalog_name_shaped(const char *image)
{
	char name[SQUASH_CATALOG_NAME_MAX + 1], version[SQUASH_CATALOG_NAME_MAX + 1];

	return image[0] != '/' && !squash_catalog_ref_parse(image, name, version, NULL, 0);
}

bool squash_catalog_missing_hint(const struct squash_catalogs *c, const char *image, char *out,
				 size_t outlen)
{
	bool known = c && squash_catalogs_knows_path(c, image);

	/* Shaped like a name, image holds nothing a terminal could obey. */
	if (known)
		snprintf(out, outlen, ": an image is a file; the catalog image of that name is "
			 "written @%s", image);
	else
		snprintf(out, outlen, "%s", squash_catalog_name_shaped(image) ? " (an image is a file, "
			 "given by its path; a catalog image is written @NAME or @NAME/VERSION)" : "");
	return known;
}

bool squash_catalogs_knows_path(const struct squash_catalogs *c, const char *image)
{
	char name[SQUASH_CATALOG_NAME_MAX + 1], version[SQUASH_CATALOG_NAME_MAX + 1];

	if (squash_catalog_ref_parse(image, name, version, NULL, 0))
		return false;
	for (size_t i = 0; i < c->count; i++)
		if (!c->items[i].refused && !c->items[i].problem &&
		    squash_catalog_index_find(&c->items[i].index, name, version[0] ? version : NULL))
			return true;
	return false;
}

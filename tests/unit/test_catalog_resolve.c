/* Resolving "@NAME[/VERSION]" (proto/catalog.h): the newest without a
 * version, the site before the user, an unreadable index stops the search,
 * unknown names get near matches, a forgotten '@' is recognised; the site
 * file's syntax and the trust rule of site catalogs (catalog_sites.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "unit.h"

static char err[4096];
static char out[4096];

static void add(struct squash_catalogs *c, enum squash_catalog_source source, const char *dir,
		const char *text)
{
	struct squash_catalog *cat = &c->items[c->count++];

	cat->source = source;
	cat->dir = strdup(dir);
	cat->real_dir = strdup(dir);
	if (squash_catalog_index_parse(text, strlen(text), dir, &cat->index, err, sizeof err))
		cat->problem = strdup(err);
}

static int resolve(const struct squash_catalogs *c, const char *ref)
{
	err[0] = out[0] = '\0';
	return squash_catalogs_resolve(c, ref, out, sizeof out, err, sizeof err);
}

static void newest_and_named_versions(void)
{
	struct squash_catalogs c = { 0 };

	add(&c, SQUASH_CATALOG_USER, "/u/cat",
	    "gnu 24.7 gnu/24.7.sqfs\ngnu 24.11 gnu/24.11.sqfs\ngnu 24.2 gnu/24.2.sqfs\n"
	    "nvhpc 1 nv.sqfs\n");
	CHECK_INT(resolve(&c, "@gnu"), 0);
	CHECK_STR(out, "/u/cat/gnu/24.11.sqfs");
	CHECK_INT(resolve(&c, "@gnu/24.7"), 0);
	CHECK_STR(out, "/u/cat/gnu/24.7.sqfs");
	CHECK_INT(resolve(&c, "@gnu/25.1"), -1);
	CHECK_CONTAINS(err, "gnu has no version 25.1");
	CHECK_CONTAINS(err, "24.11, 24.7, 24.2");
	/* Names checked like every other input. */
	CHECK_INT(resolve(&c, "@../gnu"), -1);
	CHECK_CONTAINS(err, "the form is @NAME or @NAME/VERSION");
	CHECK_INT(resolve(&c, "@gnu/../x"), -1);
	CHECK_INT(resolve(&c, "@gnu/24.7/x"), -1);
	CHECK_INT(resolve(&c, "@"), -1);
	CHECK_INT(resolve(&c, "@gnu\x1b"), -1);
	CHECK_CONTAINS(err, "\\x1b");
	squash_catalogs_free(&c);
}

/* uenv's NAME/VERSION:TAG@SYSTEM: the '@' named, and that this form has
 * neither; a tag where TARGET goes gets the same words. */
static void uenv_systems_and_tags_get_the_form(void)
{
	struct squash_catalogs c = { 0 };
	char name[SQUASH_CATALOG_NAME_MAX + 1], version[SQUASH_CATALOG_NAME_MAX + 1];

	add(&c, SQUASH_CATALOG_USER, "/u/cat", "gnu 24.7 gnu/24.7.sqfs\n");
	CHECK_INT(resolve(&c, "@gnu/24.7@zen2"), -1);
	CHECK_STR(err, "@gnu/24.7@zen2: version '24.7@zen2' holds '@' (a version is made of letters, "
		  "digits and . _ + -) (no systems or tags here: write @NAME/VERSION, optionally "
		  ":/TARGET)");
	CHECK_INT(resolve(&c, "@gnu@zen2"), -1);
	CHECK_CONTAINS(err, "name 'gnu@zen2' holds '@'");
	CHECK_CONTAINS(err, SQUASH_CATALOG_NO_TAGS_HINT);
	/* Other mistakes get the form, not the hint. */
	CHECK_INT(resolve(&c, "@gnu/24.7/x"), -1);
	CHECK_CONTAINS(err, "holds '/' (a version is made of letters, digits and . _ + -) (the form "
		       "is @NAME or @NAME/VERSION)");
	CHECK(strstr(err, "no systems or tags") == NULL);
	/* Without the '@' (publish's NAME/VERSION): the reason alone. */
	CHECK_INT(squash_catalog_ref_parse("gnu/1@x", name, version, err, sizeof err), -1);
	CHECK_STR(err, "version '1@x' holds '@' (a version is made of letters, digits and . _ + -)");
	CHECK_STR(squash_catalog_target_hint("v1"), " " SQUASH_CATALOG_NO_TAGS_HINT);
	CHECK_STR(squash_catalog_target_hint("opt/env"), " " SQUASH_CATALOG_NO_TAGS_HINT);
	CHECK_STR(squash_catalog_target_hint("/opt/env"), "");
	CHECK_STR(squash_catalog_target_hint(NULL), "");
	squash_catalogs_free(&c);
}

static void site_wins_and_near_matches(void)
{
	struct squash_catalogs c = { 0 };
	char near[512];

	add(&c, SQUASH_CATALOG_SITE, "/site", "gnu 1 site-gnu.sqfs\nprgenv-gnu 24.11 p.sqfs\n");
	add(&c, SQUASH_CATALOG_USER, "/u/cat", "gnu 9 mine.sqfs\nmytools 1 t.sqfs\n");
	/* The user's newer version does not shadow the site's name. */
	CHECK_INT(squash_catalogs_find(&c, "gnu", NULL, &(const struct squash_catalog *){ 0 }, err,
				       sizeof err) == &c.items[0].index.entries[0], 1);
	/* ...nor does it supply a version the site lacks. */
	CHECK_INT(resolve(&c, "@gnu/9"), -1);
	CHECK_CONTAINS(err, "the site catalog /site");
	CHECK_INT(resolve(&c, "@mytools"), 0);
	CHECK_STR(out, "/u/cat/t.sqfs");

	CHECK_INT(resolve(&c, "@prgenv-gun"), -1);
	CHECK_CONTAINS(err, "no image named prgenv-gun");
	CHECK_CONTAINS(err, "did you mean @prgenv-gnu?");
	CHECK_INT(resolve(&c, "@prgenv"), -1);
	CHECK_CONTAINS(err, "@prgenv-gnu");
	CHECK_INT(resolve(&c, "@zzzzzzzz"), -1);
	CHECK(strstr(err, "did you mean") == NULL);
	CHECK_INT(squash_catalogs_near(&c, "GNU", 5, near, sizeof near), 2);
	CHECK_STR(near, "@gnu, @prgenv-gnu");

	/* The '@' forgotten, as a uenv user would write it. */
	CHECK(squash_catalogs_knows_path(&c, "prgenv-gnu/24.11"));
	CHECK(squash_catalogs_knows_path(&c, "gnu"));
	CHECK(!squash_catalogs_knows_path(&c, "prgenv-gnu/24.12"));
	CHECK(!squash_catalogs_knows_path(&c, "./gnu"));
	CHECK(!squash_catalogs_knows_path(&c, "/abs/gnu"));
	/* What the plugin, squash-images and squash-shell add to ENOENT. */
	CHECK(squash_catalog_missing_hint(&c, "prgenv-gnu/24.11", out, sizeof out));
	CHECK_STR(out, ": an image is a file; the catalog image of that name is written "
		  "@prgenv-gnu/24.11");
	CHECK(!squash_catalog_missing_hint(&c, "prgenv-gnu/24.12", out, sizeof out));
	CHECK_STR(out, " (an image is a file, given by its path; a catalog image is written @NAME "
		  "or @NAME/VERSION)");
	CHECK(!squash_catalog_missing_hint(NULL, "gnu", out, sizeof out)); /* not read: the shape */
	CHECK_CONTAINS(out, "a catalog image is written @NAME");
	CHECK(!squash_catalog_missing_hint(&c, "./gnu", out, sizeof out));
	CHECK_STR(out, "");
	CHECK(!squash_catalog_missing_hint(&c, "/abs/gnu", out, sizeof out));
	CHECK_STR(out, "");
	CHECK(squash_catalog_name_shaped("gnu/1") && !squash_catalog_name_shaped("a/b/c"));
	squash_catalogs_free(&c);
}

static void unreadable_and_refused_catalogs(void)
{
	struct squash_catalogs c = { 0 };

	/* A refused site catalog is skipped; a malformed one stops the search. */
	add(&c, SQUASH_CATALOG_SITE, "/bad-site", "gnu 1 g.sqfs\n");
	c.items[0].refused = true;
	c.items[0].problem = strdup("site catalog /bad-site is not used: writable by others");
	add(&c, SQUASH_CATALOG_SITE, "/site", "gnu 1 ../g.sqfs\n");
	add(&c, SQUASH_CATALOG_USER, "/u/cat", "gnu 2 g.sqfs\n");
	CHECK_INT(resolve(&c, "@gnu"), -1);
	CHECK_CONTAINS(err, "/site:1:");
	CHECK_CONTAINS(err, "'..'");
	CHECK(!squash_catalogs_knows_path(&c, "gnu/1"));
	squash_catalogs_free(&c);
}

static void site_file_syntax(void)
{
	char *dirs[SQUASH_CATALOG_SITES_MAX];
	size_t n;
	const char *ok = "# site catalogs\n\ncatalog /apps/images\n  catalog\t/scratch/cat  \n";

	CHECK_INT(squash_catalog_conf_parse(ok, strlen(ok), "/etc/x", dirs, &n, err, sizeof err), 0);
	CHECK_INT(n, 2);
	CHECK_STR(dirs[0], "/apps/images");
	CHECK_STR(dirs[1], "/scratch/cat");
	while (n)
		free(dirs[--n]);
	CHECK_INT(squash_catalog_conf_parse("catalogs /a\n", 12, "/etc/x", dirs, &n, err, sizeof err), -1);
	CHECK_CONTAINS(err, "/etc/x:1: unknown setting 'catalogs'");
	CHECK_INT(squash_catalog_conf_parse("#\ncatalog rel\n", 14, "/etc/x", dirs, &n, err, sizeof err), -1);
	CHECK_CONTAINS(err, "/etc/x:2: catalog needs an absolute directory");
	CHECK_INT(n, 0);
}

static void trust_of_site_catalogs(void)
{
	char dir[] = "/tmp/catalog-trust-XXXXXX";

	/* Root's system directories pass, whoever runs the test. */
	CHECK_INT(squash_catalog_trusted("/usr", false, err, sizeof err), 0);
	CHECK_INT(squash_catalog_trusted("/usr/bin", true, err, sizeof err), -1);
	CHECK_CONTAINS(err, "not a regular file");
	if (!mkdtemp(dir))
		return;
	chmod(dir, 0755);
	/* The runner's own directory: root's (when root runs it) and then
	 * refused once others may write it. */
	if (geteuid() == 0) {
		CHECK_INT(squash_catalog_trusted(dir, false, err, sizeof err), 0);
		chmod(dir, 0775);
		CHECK_INT(squash_catalog_trusted(dir, false, err, sizeof err), -1);
		CHECK_CONTAINS(err, "writable by its group");
		chmod(dir, 01777); /* sticky is fine above a catalog, not for it */
		CHECK_INT(squash_catalog_trusted(dir, false, err, sizeof err), -1);
		CHECK_CONTAINS(err, "writable by others");
	} else {
		CHECK_INT(squash_catalog_trusted(dir, false, err, sizeof err), -1);
		CHECK_CONTAINS(err, "not owned by root");
	}
	rmdir(dir);
}

int main(void)
{
	newest_and_named_versions();
	uenv_systems_and_tags_get_the_form();
	site_wins_and_near_matches();
	unreadable_and_refused_catalogs();
	site_file_syntax();
	trust_of_site_catalogs();
	return unit_exit_code();
}

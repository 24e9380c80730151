/* Target policy syntax: allowed prefixes, system paths, target checks. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "imagespec.h"
#include "target.h"
#include "unit.h"

static char err[512];
static struct squash_prefixes allowed;

static const char *target_error(const char *target)
{
	err[0] = '\0';
	CHECK_INT(squash_target_check(target, &allowed, err, sizeof(err)), -1);
	return err;
}

static const char *prefixes_error(const char *text)
{
	struct squash_prefixes p;

	err[0] = '\0';
	CHECK_INT(squash_prefixes_parse(text, &p, err, sizeof(err)), -1);
	CHECK_INT(p.count, 0);
	return err;
}

static void test_prefixes(void)
{
	char many[SQUASH_MAX_PREFIXES * 8 + 16] = "";
	struct squash_prefixes p;
	int i;

	CHECK_INT(squash_prefixes_parse("/squash:/scratch/img", &p, err, sizeof(err)), 0);
	CHECK_INT(p.count, 2);
	CHECK_STR(p.items[0], "/squash");
	CHECK_STR(p.items[1], "/scratch/img");
	squash_prefixes_free(&p);
	CHECK_INT(p.count, 0);

	CHECK_STR(prefixes_error(""), "no target prefix given");
	CHECK_STR(prefixes_error("/squash:"), "empty target prefix");
	CHECK_STR(prefixes_error("squash"), "target prefix 'squash' is not an absolute path");
	CHECK_STR(prefixes_error("/"), "target prefix '/' is a system directory");
	CHECK_STR(prefixes_error("/squash:/usr/local"),
		  "target prefix '/usr/local' is a system directory");
	CHECK_STR(prefixes_error("/squash/"), "target prefix '/squash/' ends with '/'");
	CHECK_CONTAINS(prefixes_error("/a/../etc"), "is not normalised");
	CHECK_CONTAINS(prefixes_error("/a//b"), "is not normalised");

	for (i = 0; i < SQUASH_MAX_PREFIXES; i++)
		strcat(many, i ? ":/p" : "/p");
	CHECK_INT(squash_prefixes_parse(many, &p, err, sizeof(err)), 0);
	CHECK_INT(p.count, SQUASH_MAX_PREFIXES);
	squash_prefixes_free(&p);
	strcat(many, ":/p");
	CHECK_STR(prefixes_error(many), "too many target prefixes (at most 16)");
}

static void test_system_paths(void)
{
	CHECK(squash_is_system_path("/"));
	CHECK(squash_is_system_path("/etc"));
	CHECK(squash_is_system_path("/etc/squash"));
	CHECK(squash_is_system_path("//usr/lib"));
	CHECK(squash_is_system_path("/run/squashd"));
	CHECK(squash_is_system_path("/lib64"));
	CHECK(squash_is_system_path("/proc/self"));
	CHECK(squash_is_system_path("/./etc"));
	CHECK(!squash_is_system_path("/etcetera"));
	CHECK(!squash_is_system_path("/opt/x"));
	CHECK(!squash_is_system_path("/squash/etc"));
	CHECK(!squash_is_system_path("/home/a"));
}

static void test_targets(void)
{
	char *long_target;

	CHECK_INT(squash_prefixes_parse("/squash:/scratch/img", &allowed, err, sizeof(err)), 0);
	CHECK_INT(squash_target_check("/squash/tools", &allowed, err, sizeof(err)), 0);
	CHECK_INT(squash_target_check("/squash/a/b/c", &allowed, err, sizeof(err)), 0);
	CHECK_INT(squash_target_check("/scratch/img/x", &allowed, err, sizeof(err)), 0);

	CHECK_STR(target_error(""), "empty target");
	CHECK_STR(target_error("squash/x"), "target 'squash/x' is not an absolute path");
	CHECK_STR(target_error("/squash"),
		  "target '/squash' is the prefix itself; mount below it, e.g. /squash/NAME");
	CHECK_STR(target_error("/squashX/y"),
		  "target '/squashX/y' is not below an allowed prefix (/squash:/scratch/img)");
	CHECK_STR(target_error("/scratch/x"),
		  "target '/scratch/x' is not below an allowed prefix (/squash:/scratch/img)");
	CHECK_STR(target_error("/squash/x/"), "target '/squash/x/' ends with '/'");
	CHECK_CONTAINS(target_error("/squash/../etc"), "is not normalised");
	CHECK_CONTAINS(target_error("/squash/./x"), "is not normalised");
	CHECK_CONTAINS(target_error("/squash//x"), "is not normalised");
	CHECK_STR(target_error("/squash/a:b"),
		  "target '/squash/a:b' contains ':'; mount points may not contain ',' or ':' (they are listed in SQUASH_MOUNTS separated by ':'), choose another TARGET");
	CHECK_CONTAINS(target_error("/squash/a,b"), "target '/squash/a,b' contains ','; ");
	CHECK_STR(target_error("/squash/a\nb"),
		  "target '/squash/a\\x0ab' contains a control character");
	CHECK_STR(target_error("/etc/x"), "target '/etc/x' is a system directory");
	CHECK_STR(target_error("/"), "target '/' is a system directory");

	long_target = malloc(SQUASH_PATH_MAX + 1);
	strcpy(long_target, "/squash/");
	memset(long_target + 8, 'x', SQUASH_PATH_MAX - 8);
	long_target[SQUASH_PATH_MAX] = '\0';
	CHECK_STR(target_error(long_target), "target is too long (at most 4095 bytes)");
	long_target[SQUASH_PATH_MAX - 1] = '\0';
	CHECK_INT(squash_target_check(long_target, &allowed, err, sizeof(err)), 0);
	free(long_target);

	CHECK_INT(squash_target_check("/squash/x", NULL, err, sizeof(err)), -1);
	CHECK_STR(err, "no target prefixes are allowed on this node");
	squash_prefixes_free(&allowed);

	/* allowed_targets' exact targets (=DIR): DIR itself, nothing below it;
	 * plain prefix lists take none. */
	CHECK_INT(squash_allowed_targets_parse("/squash:=/user-environment", &allowed, err, sizeof(err)), 0);
	CHECK_INT(allowed.count, 2);
	CHECK(!allowed.exact[0] && allowed.exact[1]);
	CHECK_STR(allowed.items[1], "/user-environment");
	CHECK_INT(squash_target_check("/user-environment", &allowed, err, sizeof(err)), 0);
	CHECK_INT(squash_target_check("/squash/x", &allowed, err, sizeof(err)), 0);
	CHECK_STR(target_error("/user-environment/x"), "target '/user-environment/x' is not below an "
		  "allowed prefix (/squash:=/user-environment)");
	CHECK(!squash_prefixes_contain(&allowed, "/user-environment/x"));
	char shown[128];
	squash_prefixes_format(&allowed, shown, sizeof(shown));
	CHECK_STR(shown, "/squash:=/user-environment");
	squash_prefixes_free(&allowed);
	CHECK_INT(squash_allowed_targets_parse("/squash:=/etc", &allowed, err, sizeof(err)), -1);
	CHECK_STR(err, "exact target '/etc' is a system directory");
	CHECK_INT(squash_allowed_targets_parse("=relative", &allowed, err, sizeof(err)), -1);
	CHECK_STR(err, "exact target 'relative' is not an absolute path");
	CHECK_STR(prefixes_error("=/user-environment"),
		  "target prefix '=/user-environment' is not an absolute path");
}

static void test_overlaps(void)
{
	CHECK(squash_targets_overlap("/squash/x", "/squash/x"));
	CHECK(squash_targets_overlap("/squash/x", "/squash/x/y"));
	CHECK(squash_targets_overlap("/squash/x/y/z", "/squash/x"));
	CHECK(!squash_targets_overlap("/squash/x", "/squash/xy"));
	CHECK(!squash_targets_overlap("/squash/xy", "/squash/x"));
	CHECK(!squash_targets_overlap("/squash/x", "/squash/y"));
	CHECK(squash_targets_overlap("/", "/squash"));

	CHECK_INT(squash_target_pair_check("a.sqfs", "/squash/a", "b.sqfs", "/squash/b",
					   err, sizeof(err)), 0);
	/* The same target twice is a merge group. */
	err[0] = '\0';
	CHECK_INT(squash_target_pair_check("a.sqfs", "/squash/x", "b.sqfs", "/squash/x",
					   err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_INT(squash_target_merge_check("a.sqfs", "/squash/x", false, "b.sqfs", "/squash/x", false,
					    err, sizeof(err)), 0);
	CHECK_INT(squash_target_merge_check("a.sqfs", "/squash/x", false, "a.sqfs", "/squash/x", false,
					    err, sizeof(err)), 0);
	/* ... which is read-only: no :rw in it, either way round. */
	CHECK_INT(squash_target_merge_check("a.sqfs", "/squash/x", false, "b.sqfs", "/squash/x", true,
					    err, sizeof(err)), -1);
	CHECK_STR(err, "a.sqfs and b.sqfs are merged at /squash/x (the same target), and merged images are read-only: :rw is not supported on a merge group; drop :rw, or give b.sqfs a target of its own");
	CHECK_INT(squash_target_merge_check("a.sqfs", "/squash/x", true, "b.sqfs", "/squash/x", false,
					    err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "give a.sqfs a target of its own");
	/* :rw alone at a target of its own is fine. */
	CHECK_INT(squash_target_merge_check("a.sqfs", "/squash/x", true, "b.sqfs", "/squash/y", false,
					    err, sizeof(err)), 0);
	/* Nested stays refused, with or without :rw. */
	CHECK_INT(squash_target_merge_check("a.sqfs", "/squash/x", false, "b.sqfs", "/squash/x/y", false,
					    err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "nested targets are not supported");
	/* Either order names the inner one and the outer one the same way. */
	CHECK_INT(squash_target_pair_check("a.sqfs", "/squash/x", "b.sqfs", "/squash/x/y",
					   err, sizeof(err)), -1);
	CHECK_STR(err, "target /squash/x/y of b.sqfs lies inside target /squash/x of a.sqfs; nested targets are not supported (one mount would hide the other or could not be made), give b.sqfs a target outside /squash/x (IMAGE:TARGET)");
	CHECK_INT(squash_target_pair_check("b.sqfs", "/squash/x/y", "a.sqfs", "/squash/x",
					   err, sizeof(err)), -1);
	CHECK_STR(err, "target /squash/x/y of b.sqfs lies inside target /squash/x of a.sqfs; nested targets are not supported (one mount would hide the other or could not be made), give b.sqfs a target outside /squash/x (IMAGE:TARGET)");
}

int main(void)
{
	test_overlaps();
	test_prefixes();
	test_system_paths();
	test_targets();
	return unit_exit_code();
}

/* The --squash-image syntax: parsing, canonical text, default targets. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_glob.h"
#include "imagespec.h"
#include "unit.h"

static char err[512];

/* Parses text expecting failure; returns the message. */
static const char *parse_error(const char *text)
{
	struct squash_image_list list;

	err[0] = '\0';
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), -1);
	CHECK_INT(list.count, 0);
	return err;
}

static void test_single_and_targets(void)
{
	struct squash_image_list list;

	CHECK_INT(squash_imagespec_parse("tools.sqfs", &list, err, sizeof(err)), 0);
	CHECK_INT(list.count, 1);
	CHECK_STR(list.items[0].image, "tools.sqfs");
	CHECK(list.items[0].target == NULL);
	squash_imagespec_free(&list);

	CHECK_INT(squash_imagespec_parse("/a/x.sqfs:/squash/x,rel/y.sqsh,z:/squash/zz",
					 &list, err, sizeof(err)), 0);
	CHECK_INT(list.count, 3);
	CHECK_STR(list.items[0].image, "/a/x.sqfs");
	CHECK_STR(list.items[0].target, "/squash/x");
	CHECK_STR(list.items[1].image, "rel/y.sqsh");
	CHECK(list.items[1].target == NULL);
	CHECK_STR(list.items[2].image, "z");
	CHECK_STR(list.items[2].target, "/squash/zz");
	squash_imagespec_free(&list);
	CHECK_INT(list.count, 0);
}

static void test_format_round_trip(void)
{
	struct squash_image_list list, again;
	const char *text = "/a/x.sqfs:/squash/x,/b/y.sqsh,/c/z.sfs:/squash/z";
	char *formatted;

	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	formatted = squash_imagespec_format(&list);
	CHECK_STR(formatted, text);
	CHECK_INT(squash_imagespec_parse(formatted, &again, err, sizeof(err)), 0);
	CHECK_INT(again.count, 3);
	free(formatted);
	squash_imagespec_free(&again);
	squash_imagespec_free(&list);

	list.count = 0;
	formatted = squash_imagespec_format(&list);
	CHECK_STR(formatted, "");
	free(formatted);
}

static void test_writable_flag(void)
{
	struct squash_image_list list;
	const char *text = "/a/x.sqfs:/squash/x:rw,/b/y.sqsh,/c/z.sfs::rw,/d/u.sqfs::rw=/keep/u";
	char *formatted;

	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(list.count, 4);
	CHECK_STR(list.items[0].target, "/squash/x");
	CHECK(list.items[0].writable);
	CHECK(list.items[0].upper == NULL);
	CHECK(list.items[3].writable);
	CHECK(list.items[3].target == NULL);
	CHECK_STR(list.items[3].upper, "/keep/u");
	CHECK(!list.items[1].writable);
	CHECK(list.items[2].target == NULL);
	CHECK(list.items[2].writable);
	formatted = squash_imagespec_format(&list);
	CHECK_STR(formatted, text);
	free(formatted);
	squash_imagespec_free(&list);
	CHECK(!list.items[0].writable);

	/* DIR is a path like the others: escapes in, escapes out. */
	text = "/a/x.sqfs::rw=/keep/a\\,b\\:c";
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_STR(list.items[0].upper, "/keep/a,b:c");
	formatted = squash_imagespec_format(&list);
	CHECK_STR(formatted, text);
	free(formatted);
	squash_imagespec_free(&list);
}

static void test_syntax_errors(void)
{
	CHECK_STR(parse_error(""), "no image given");
	CHECK_STR(parse_error("a.sqfs,"), "item 2 is empty (stray ',')");
	CHECK_STR(parse_error(",a.sqfs"), "item 1 is empty (stray ',')");
	CHECK_STR(parse_error("a,,b"), "item 2 is empty (stray ',')");
	CHECK_STR(parse_error("a.sqfs:"), "item 1 ('a.sqfs:'): empty target path");
	CHECK_STR(parse_error(":/squash/t"), "item 1 (':/squash/t'): empty image path");
	CHECK_CONTAINS(parse_error("a:/b:/c"), "unknown flag '/c' after the target");
	CHECK_CONTAINS(parse_error("a:/b:rw:x"), "more than two ':'");
	CHECK_CONTAINS(parse_error("a:/b:ro"), "the only flag is rw or rw=DIR");
	CHECK_CONTAINS(parse_error("a:/b:rwx"), "unknown flag 'rwx'");
	CHECK_STR(parse_error("a::rw="), "item 1 ('a::rw='): empty upper directory path");
	CHECK_STR(parse_error("a::"), "item 1 ('a::'): unknown flag '' after the target "
		  "(the only flag is rw or rw=DIR; write '\\:' for a ':' inside a path)");
	/* Control characters are named, and shown escaped, never raw. */
	CHECK_STR(parse_error("ok.sqfs,bad\n.sqfs"),
		  "item 2 ('bad\\x0a.sqfs') contains a control character (\\x0a); paths may not contain control characters");
	CHECK_STR(parse_error("a.sqfs:/squash/\x1b[31m"),
		  "item 1 ('a.sqfs:/squash/\\x1b[31m') contains a control character (\\x1b); paths may not contain control characters");
	CHECK_CONTAINS(parse_error("a\x7f"), "(\\x7f)");
	CHECK(strchr(parse_error("a\x1b]0;title\x07"), 0x1b) == NULL);
	CHECK(strchr(err, 0x07) == NULL);
}

/* '\,' '\:' and '\\' stand for themselves inside a path. */
static void test_escapes(void)
{
	struct squash_image_list list;

	CHECK_INT(squash_imagespec_parse("/d/a\\,b.sqfs:/squash/ab,/d/run\\:1.sqfs,/d/back\\\\slash",
					 &list, err, sizeof(err)), 0);
	CHECK_INT(list.count, 3);
	CHECK_STR(list.items[0].image, "/d/a,b.sqfs");
	CHECK_STR(list.items[0].target, "/squash/ab");
	CHECK_STR(list.items[1].image, "/d/run:1.sqfs");
	CHECK(list.items[1].target == NULL);
	CHECK_STR(list.items[2].image, "/d/back\\slash");
	squash_imagespec_free(&list);

	/* An escaped separator in the target is kept too (the target check
	 * refuses it later, with its own reason). */
	CHECK_INT(squash_imagespec_parse("i.sqfs:/squash/x\\:y", &list, err, sizeof(err)), 0);
	CHECK_STR(list.items[0].target, "/squash/x:y");
	squash_imagespec_free(&list);

	/* Any other backslash is refused, naming the rule. */
	CHECK_STR(parse_error("/d/a\\b"),
		  "item 1 ('/d/a\\b'): a '\\' must be followed by ',' ':' or '\\' (write '\\,' for a ',' and '\\:' for a ':' inside a path, '\\\\' for a '\\')");
	CHECK_CONTAINS(parse_error("/d/a\\"), "must be followed by");
	CHECK_STR(parse_error("a:/b:/c"),
		  "item 1 ('a:/b:/c'): unknown flag '/c' after the target (the only flag is rw or rw=DIR; write '\\:' for a ':' inside a path)");
	CHECK_CONTAINS(parse_error("a:b:c:d:e"), "too many ':'");
	/* An escaped ',' does not start an item: 17 escaped commas are fine. */
	CHECK_INT(squash_imagespec_parse("a\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,\\,",
					 &list, err, sizeof(err)), 0);
	CHECK_INT(list.count, 1);
	CHECK_STR(list.items[0].image, "a,,,,,,,,,,,,,,,,,");
	squash_imagespec_free(&list);

	/* Length limits count the path, not its escapes. */
	{
		char *p = malloc(SQUASH_PATH_MAX + 8);

		memset(p, 'p', SQUASH_PATH_MAX - 2);
		strcpy(p + SQUASH_PATH_MAX - 2, "\\,");
		CHECK_INT(squash_imagespec_parse(p, &list, err, sizeof(err)), 0);
		CHECK_INT(strlen(list.items[0].image), SQUASH_PATH_MAX - 1);
		squash_imagespec_free(&list);
		strcpy(p + SQUASH_PATH_MAX - 2, "\\,\\:");
		CHECK_STR(parse_error(p), "item 1: image path is too long (4096 bytes, at most 4095)");
		free(p);
	}
}

/* The canonical text escapes what needs it and parses to the same list. */
static void test_escaped_round_trip(void)
{
	struct squash_image_list list, again;
	char *formatted;

	memset(&list, 0, sizeof(list));
	list.count = 2;
	list.items[0].image = strdup("/d/a,b:c\\d.sqfs");
	list.items[0].target = strdup("/squash/t");
	list.items[1].image = strdup("/d/100%.sqfs");
	formatted = squash_imagespec_format(&list);
	CHECK_STR(formatted, "/d/a\\,b\\:c\\\\d.sqfs:/squash/t,/d/100%.sqfs");
	CHECK_INT(squash_imagespec_parse(formatted, &again, err, sizeof(err)), 0);
	CHECK_INT(again.count, 2);
	CHECK_STR(again.items[0].image, list.items[0].image);
	CHECK_STR(again.items[0].target, "/squash/t");
	CHECK_STR(again.items[1].image, "/d/100%.sqfs");
	CHECK(again.items[1].target == NULL);
	free(formatted);
	squash_imagespec_free(&again);
	squash_imagespec_free(&list);
}

/* The splitter the parser uses, which a flag field after TARGET will use. */
static void test_split(void)
{
	struct squash_spec_fields f;
	const char *item = "/d/a\\:b:/squash/t:rw";

	CHECK_INT(squash_spec_split(item, strlen(item), 1, &f, err, sizeof(err)), 0);
	CHECK_INT(f.count, 3);
	CHECK_INT(f.field[0].len, 7);
	CHECK_INT(squash_spec_unescaped_len(f.field[0].text, f.field[0].len), 6);
	CHECK_INT(f.field[2].len, 2);
	CHECK(strncmp(f.field[2].text, "rw", 2) == 0);
}

static void test_limits(void)
{
	struct squash_image_list list;
	char *text = malloc(8 * (SQUASH_MAX_IMAGES + 2));
	char *long_path;
	int i;

	/* Exactly SQUASH_MAX_IMAGES is fine, one more is not. */
	text[0] = '\0';
	for (i = 0; i < SQUASH_MAX_IMAGES; i++)
		strcat(text, i ? ",i.sqfs" : "i.sqfs");
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(list.count, SQUASH_MAX_IMAGES);
	squash_imagespec_free(&list);
	strcat(text, ",i.sqfs");
	CHECK_STR(parse_error(text), "too many images (1025, at most 1024 per job)");
	free(text);
	/* 1,024 images at one target: a merge group is any number of items. */
	text = malloc(SQUASH_MAX_IMAGES * 32);
	text[0] = '\0';
	for (i = 0; i < SQUASH_MAX_IMAGES; i++)
		sprintf(text + strlen(text), "%s/d/b%04d.sqfs:/squash/data", i ? "," : "", i);
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(list.count, SQUASH_MAX_IMAGES);
	CHECK_STR(list.items[1023].image, "/d/b1023.sqfs");
	CHECK_STR(list.items[1023].target, "/squash/data");
	{
		char *again = squash_imagespec_format(&list);
		CHECK_STR(again, text);
		free(again);
	}
	squash_imagespec_free(&list);
	free(text);
	/* The whole text is bounded too (tasks get it in one variable). */
	text = malloc(SQUASH_OPTION_MAX + 2);
	memset(text, 'a', SQUASH_OPTION_MAX + 1);
	text[SQUASH_OPTION_MAX + 1] = '\0';
	CHECK_STR(parse_error(text), "the image list is too long (98305 bytes, at most 98304: tasks get it in one environment variable)");
	free(text);

	long_path = malloc(SQUASH_PATH_MAX + 16);
	memset(long_path, 'p', SQUASH_PATH_MAX - 1);
	long_path[SQUASH_PATH_MAX - 1] = '\0';
	CHECK_INT(squash_imagespec_parse(long_path, &list, err, sizeof(err)), 0);
	squash_imagespec_free(&list);
	long_path[SQUASH_PATH_MAX - 1] = 'p';
	long_path[SQUASH_PATH_MAX] = '\0';
	CHECK_STR(parse_error(long_path),
		  "item 1: image path is too long (4096 bytes, at most 4095)");
	strcpy(long_path, "img:/");
	memset(long_path + 5, 't', SQUASH_PATH_MAX);
	long_path[SQUASH_PATH_MAX + 5] = '\0';
	CHECK_CONTAINS(parse_error(long_path), "target path is too long");
	free(long_path);
}

static const char *default_target(const char *image, const char *base)
{
	static char out[SQUASH_PATH_MAX];

	err[0] = '\0';
	if (squash_default_target(image, base, out, sizeof(out), err, sizeof(err)) < 0)
		return NULL;
	return out;
}

static void test_default_target(void)
{
	CHECK_STR(default_target("/home/a/tools.sqfs", "/squash"), "/squash/tools");
	CHECK_STR(default_target("ref.squashfs", "/squash"), "/squash/ref");
	CHECK_STR(default_target("x/y.sqsh", "/squash/"), "/squash/y");
	CHECK_STR(default_target("x/y.sfs", "/squash"), "/squash/y");
	CHECK_STR(default_target("data.img", "/squash"), "/squash/data.img");
	CHECK_STR(default_target("a.sqfs.sqfs", "/squash"), "/squash/a.sqfs");
	CHECK(default_target("/home/a/.sqfs", "/squash") == NULL);
	CHECK_STR(err, "cannot derive a mount point from '/home/a/.sqfs'; give one as IMAGE:TARGET");
	CHECK(default_target("/home/a/", "/squash") == NULL);
	CHECK(default_target("..", "/squash") == NULL);
	CHECK(default_target("bad\tname.sqfs", "/squash") == NULL);
	CHECK_STR(err, "image path contains a control character");

	{
		char small[16];

		CHECK_INT(squash_default_target("abcdefghij.sqfs", "/squash", small,
						sizeof(small), err, sizeof(err)), -1);
		CHECK_CONTAINS(err, "would be too long");
		CHECK_INT(squash_default_target("abcdefg.sqfs", "/squash", small,
						sizeof(small), err, sizeof(err)), 0);
		CHECK_STR(small, "/squash/abcdefg");
	}
}

static void touch(const char *dir, const char *name)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (f)
		fclose(f);
}

/* Globs in image paths expand sorted, keep the item's target and flags,
 * refuse no match and too many, and leave an existing file's name alone. */
static void test_globs(void)
{
	char dir[] = "/tmp/test_imagespec.XXXXXX", text[1024], cmd[600];
	struct squash_image_list list;
	struct squash_pattern_values v = { .user = "alice" };

	if (!mkdtemp(dir)) {
		CHECK(0);
		return;
	}
	touch(dir, "b10.sqfs");
	touch(dir, "b02.sqfs");
	touch(dir, "b01.sqfs");
	touch(dir, "notes.txt");
	touch(dir, "run[1].sqfs");
	CHECK(squash_image_is_glob("/d/b*.sqfs") && squash_image_is_glob("/d/b?.sqfs") &&
	      squash_image_is_glob("/d/b[0-9].sqfs") && !squash_image_is_glob("/d/b.sqfs"));

	snprintf(text, sizeof(text), "/x/a.sqfs:/squash/a,%s/b*.sqfs:/squash/data,/x/z.sqfs", dir);
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(squash_image_globs_expand(&list, NULL, err, sizeof(err)), 0);
	CHECK_INT(list.count, 5);
	if (list.count == 5) {
		char want[512];
		CHECK_STR(list.items[0].image, "/x/a.sqfs");
		snprintf(want, sizeof(want), "%s/b01.sqfs", dir);
		CHECK_STR(list.items[1].image, want);
		snprintf(want, sizeof(want), "%s/b02.sqfs", dir);
		CHECK_STR(list.items[2].image, want);
		snprintf(want, sizeof(want), "%s/b10.sqfs", dir);
		CHECK_STR(list.items[3].image, want);
		CHECK_STR(list.items[3].target, "/squash/data");
		CHECK_STR(list.items[4].image, "/x/z.sqfs");
	}
	squash_imagespec_free(&list);

	/* With pattern values, %u is expanded first and '%' doubled after. */
	snprintf(text, sizeof(text), "%s/b?[12].sqfs::rw", dir);
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(squash_image_globs_expand(&list, &v, err, sizeof(err)), 0);
	CHECK_INT(list.count, 2);
	CHECK(list.count == 2 && list.items[1].writable && !list.items[1].target);
	squash_imagespec_free(&list);
	snprintf(text, sizeof(text), "%s/b*_%%a.sqfs", dir);
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(squash_image_globs_expand(&list, &v, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "a glob cannot hold %a, %A or %j");
	squash_imagespec_free(&list);

	/* No match is an error with the count. */
	snprintf(text, sizeof(text), "%s/c*.sqfs:/squash/data", dir);
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(squash_image_globs_expand(&list, NULL, err, sizeof(err)), -1);
	CHECK_CONTAINS(err, "/c*.sqfs: no file matches (0 images)");
	CHECK_INT(list.count, 1); /* the list is left as it was */
	squash_imagespec_free(&list);

	/* A file whose name holds '[' is taken as it is. */
	snprintf(text, sizeof(text), "%s/run[1].sqfs", dir);
	CHECK_INT(squash_imagespec_parse(text, &list, err, sizeof(err)), 0);
	CHECK_INT(squash_image_globs_expand(&list, NULL, err, sizeof(err)), 0);
	CHECK(list.count == 1 && strstr(list.items[0].image, "run[1].sqfs"));
	squash_imagespec_free(&list);

	/* More matches than a job may have images, counted. */
	{
		struct squash_image_list *big = calloc(1, sizeof(*big));
		for (size_t i = 0; i < SQUASH_MAX_IMAGES - 1; i++)
			big->items[big->count++].image = strdup("/x/a.sqfs");
		snprintf(text, sizeof(text), "%s/b*.sqfs", dir);
		big->items[big->count++].image = strdup(text);
		CHECK_INT(squash_image_globs_expand(big, NULL, err, sizeof(err)), -1);
		CHECK_CONTAINS(err, "matches 3 files; with the other images that is 1026, more than the 1024 a job may have");
		squash_imagespec_free(big);
		free(big);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0);
}

int main(void)
{
	test_single_and_targets();
	test_format_round_trip();
	test_writable_flag();
	test_syntax_errors();
	test_escapes();
	test_escaped_round_trip();
	test_split();
	test_limits();
	test_default_target();
	test_globs();
	return unit_exit_code();
}

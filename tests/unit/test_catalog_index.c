/* A catalog's index (proto/catalog_index.h): lines parsed into entries,
 * every malformed line an error naming the file and line, hostile input
 * bounded, names checked like every other input, and versions ordered like
 * `sort -V`. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "catalog_index.h"
#include "unit.h"

static char err[2048];

static int parse(const char *text, struct squash_catalog_index *out)
{
	err[0] = '\0';
	return squash_catalog_index_parse(text, strlen(text), "/cat/index.tsv", out, err, sizeof err);
}

static void parses_lines_comments_and_descriptions(void)
{
	struct squash_catalog_index idx;

	CHECK_INT(parse("# site images\n\n"
			"prgenv-gnu 24.7  prgenv-gnu/24.7.sqfs\n"
			"prgenv-gnu\t24.11\tprgenv-gnu/24.11.sqfs\tGNU compilers,  MPI \r\n"
			"   # indented comment\n"
			"py_3.12+cuda 1.0-rc1 sub/dir/py.sqfs", &idx), 0);
	CHECK_INT(idx.count, 3);
	CHECK_STR(idx.entries[0].name, "prgenv-gnu");
	CHECK_STR(idx.entries[0].description, "");
	CHECK_INT(idx.entries[0].line, 3);
	CHECK_STR(idx.entries[1].description, "GNU compilers,  MPI");
	CHECK_STR(idx.entries[2].file, "sub/dir/py.sqfs");
	CHECK_STR(idx.entries[2].version, "1.0-rc1");
	CHECK_STR(squash_catalog_index_find(&idx, "prgenv-gnu", NULL)->version, "24.11");
	CHECK_STR(squash_catalog_index_find(&idx, "prgenv-gnu", "24.7")->file, "prgenv-gnu/24.7.sqfs");
	CHECK(squash_catalog_index_find(&idx, "prgenv-gnu", "24.8") == NULL);
	CHECK(squash_catalog_index_find(&idx, "prgenv", NULL) == NULL);
	squash_catalog_index_free(&idx);

	CHECK_INT(parse("", &idx), 0);
	CHECK_INT(idx.count, 0);
	squash_catalog_index_free(&idx);
}

/* Each malformed line: an error with the file, the line and the reason. */
static void malformed(const char *text, const char *where, const char *why)
{
	struct squash_catalog_index idx;

	CHECK_INT(parse(text, &idx), -1);
	CHECK_CONTAINS(err, where);
	CHECK_CONTAINS(err, why);
	CHECK_INT(idx.count, 0);
	CHECK(idx.entries == NULL);
}

static void malformed_lines_name_file_and_line(void)
{
	malformed("a 1 a.sqfs\nb 1\n", "/cat/index.tsv:2:", "no file");
	malformed("a\n", "/cat/index.tsv:1:", "no version");
	malformed("# x\na 1 ../etc/passwd\n", "/cat/index.tsv:2:", "'..'");
	malformed("a 1 /etc/x.sqfs\n", ":1:", "relative");
	malformed("a 1 x/./y.sqfs\n", ":1:", "'.'");
	malformed("a 1 x//y.sqfs\n", ":1:", "empty");
	malformed("a 1 dir/\n", ":1:", "ends in '/'");
	malformed("../a 1 a.sqfs\n", ":1:", "name '../a'");
	malformed(".hidden 1 a.sqfs\n", ":1:", "starts with '.'");
	malformed("a .1 a.sqfs\n", ":1:", "version '.1' starts with '.'");
	malformed("a 1/2 a.sqfs\n", ":1:", "version");
	malformed("a$b 1 a.sqfs\n", ":1:", "name 'a$b' holds '$'");
	malformed("a 1 a.sqfs\nb 2 b.sqfs\na 1 c.sqfs\n", ":3:", "already on line 1");
	malformed("a 1 a.sqfs desc\x1b[2J\n", ":1:", "control character (\\x1b)");
	malformed("a 1 a.sqfs\nb\x01 1 b.sqfs\n", ":2:", "control character");
}

static void hostile_input_is_bounded(void)
{
	struct squash_catalog_index idx;
	size_t big = 70 * 1024;
	char *text = malloc(big + 1);
	char name[80];

	/* A line longer than the limit. */
	memset(text, 'a', big);
	text[big] = '\0';
	malformed(text, ":1:", "line is too long");
	/* A name longer than 64 characters. */
	memset(name, 'n', 65);
	strcpy(name + 65, " 1 f");
	malformed(name, ":1:", "too long");
	/* A NUL byte inside: not text. */
	CHECK_INT(squash_catalog_index_parse("a 1 f\0b 1 g\n", 12, "/i", &idx, err, sizeof err), -1);
	CHECK_CONTAINS(err, "NUL");
	/* More than the largest index. */
	CHECK_INT(squash_catalog_index_parse(text, SQUASH_CATALOG_INDEX_MAX + 1, "/i", &idx, err,
					     sizeof err), -1);
	CHECK_CONTAINS(err, "too large");
	free(text);

	/* More entries than a catalog may have: refused at the first too many. */
	size_t n = SQUASH_CATALOG_ENTRIES_MAX + 1, used = 0;
	text = malloc(n * 24);
	for (size_t i = 0; i < n; i++)
		used += (size_t)sprintf(text + used, "n%zu 1 f%zu\n", i, i);
	CHECK_INT(squash_catalog_index_parse(text, used, "/i", &idx, err, sizeof err), -1);
	CHECK_CONTAINS(err, "more than 20000 images");
	free(text);
	/* Only newlines: no entries, no error. */
	CHECK_INT(parse("\n\n\n\n", &idx), 0);
	squash_catalog_index_free(&idx);
}

static void versions_order_like_sort_v(void)
{
	/* Each one older than the next. */
	static const char *const order[] = { "1.0~rc1", "1.0", "1.0a", "1.0.1", "1.2", "1.10",
					     "2", "24.7", "24.11", "24.11.1", "v1", "v2", "v10" };
	size_t n = sizeof(order) / sizeof(order[0]);

	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			int c = squash_catalog_version_cmp(order[i], order[j]);

			if ((i < j && c >= 0) || (i > j && c <= 0) || (i == j && c != 0))
				fprintf(stderr, "order of %s and %s: %d\n", order[i], order[j], c);
			CHECK(i < j ? c < 0 : i > j ? c > 0 : c == 0);
		}
	/* Equal as versions, still one order. */
	CHECK(squash_catalog_version_cmp("1.01", "1.1") != 0);
	CHECK(squash_catalog_version_cmp("1.01", "1.1") == -squash_catalog_version_cmp("1.1", "1.01"));
}

static void names_and_files_are_checked(void)
{
	CHECK(squash_catalog_name_ok("prgenv-gnu", "name", err, sizeof err));
	CHECK(squash_catalog_name_ok("A.b_c+d-1", "name", err, sizeof err));
	CHECK(!squash_catalog_name_ok("", "name", err, sizeof err));
	CHECK(!squash_catalog_name_ok("..", "name", err, sizeof err));
	CHECK(!squash_catalog_name_ok("a/b", "name", err, sizeof err));
	CHECK(!squash_catalog_name_ok("a b", "version", err, sizeof err));
	CHECK_CONTAINS(err, "version 'a b'");
	CHECK(!squash_catalog_name_ok("a\nb", "name", err, sizeof err));
	CHECK_CONTAINS(err, "\\x0a"); /* shown escaped, never raw */
	/* The offending character itself, shown safely. */
	CHECK(!squash_catalog_name_ok("24.11@zen2", "version", err, sizeof err));
	CHECK_STR(err, "version '24.11@zen2' holds '@' (a version is made of letters, digits and "
		  ". _ + -)");
	CHECK(!squash_catalog_name_ok("a\x1b[2Jb", "name", err, sizeof err));
	CHECK_CONTAINS(err, "holds '\\x1b'");
	CHECK(!squash_catalog_name_ok("caf\xc3\xa9", "name", err, sizeof err));
	CHECK_CONTAINS(err, "holds '\xc3\xa9'"); /* é, whole */
	CHECK(!squash_catalog_name_ok("a\xc2\x9b" "1m", "name", err, sizeof err));
	CHECK_CONTAINS(err, "holds '\\xc2'"); /* a C1 control (CSI): never raw */
	CHECK(!squash_catalog_name_ok("a\xff", "name", err, sizeof err));
	CHECK_CONTAINS(err, "holds '\\xff'"); /* not UTF-8 */
	/* The whole name quoted back is shown the same way. */
	CHECK(!squash_catalog_name_ok("ab\xc2\x9bz", "name", err, sizeof err));
	CHECK(strstr(err, "\xc2\x9b") == NULL);
	CHECK_CONTAINS(err, "name 'ab\\xc2\\x9bz' holds '\\xc2'");
	CHECK(!squash_catalog_name_ok("a\xf8\x80\x80", "name", err, sizeof err));
	CHECK_CONTAINS(err, "holds '\\xf8'"); /* no lead byte past U+10FFFF */
	CHECK(!squash_catalog_name_ok("a\xc3", "name", err, sizeof err));
	CHECK_CONTAINS(err, "holds '\\xc3'"); /* cut short */
	CHECK(squash_catalog_file_ok("a/b/c.sqfs", err, sizeof err));
	CHECK(squash_catalog_file_ok("..a/b..", err, sizeof err));
	CHECK(!squash_catalog_file_ok("a/../b", err, sizeof err));
	CHECK(!squash_catalog_file_ok("..", err, sizeof err));
	CHECK(!squash_catalog_file_ok("", err, sizeof err));
}

static void index_lines_round_trip(void)
{
	struct squash_catalog_entry e = { .name = "gnu", .version = "24.11", .file = "gnu/24.11.sqfs",
					  .description = "GNU compilers" };
	struct squash_catalog_index idx;
	char *line = squash_catalog_index_line(&e);

	CHECK_STR(line, "gnu\t24.11\tgnu/24.11.sqfs\tGNU compilers\n");
	CHECK_INT(parse(line, &idx), 0);
	CHECK_STR(idx.entries[0].description, "GNU compilers");
	squash_catalog_index_free(&idx);
	free(line);
}

int main(void)
{
	parses_lines_comments_and_descriptions();
	malformed_lines_name_file_and_line();
	hostile_input_is_bounded();
	versions_order_like_sort_v();
	names_and_files_are_checked();
	index_lines_round_trip();
	return unit_exit_code();
}

/* The JSON reader for other tools' image metadata (proto/json_value.h):
 * what it keeps of valid text, and that it refuses, with the line, what
 * RFC 8259 does not allow and what passes its bounds. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_value.h"
#include "unit.h"

static void reads_values_and_decodes_strings(void)
{
	static const char text[] =
		"\xef\xbb\xbf { \"a\": [1, -2.5e+3, true, false, null],\n"
		"  \"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t \\u00e9 \\ud83d\\ude00 \xc3\xa9\",\n"
		"  \"dup\": \"first\", \"dup\": \"last\", \"o\": {} }";
	char err[256] = "";
	struct squash_json *v = squash_json_parse(text, sizeof text - 1, err, sizeof err);
	const struct squash_json *a, *e;

	CHECK(v != NULL);
	if (!v) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	CHECK_INT(v->type, SQUASH_JSON_OBJECT);
	a = squash_json_member(v, "a");
	CHECK(a && a->type == SQUASH_JSON_ARRAY);
	e = a ? a->child : NULL;
	CHECK(e && e->type == SQUASH_JSON_NUMBER && !strcmp(e->text, "1"));
	e = e ? e->next : NULL;
	CHECK(e && e->type == SQUASH_JSON_NUMBER && !strcmp(e->text, "-2.5e+3"));
	e = e ? e->next : NULL;
	CHECK(e && e->type == SQUASH_JSON_TRUE);
	e = e ? e->next : NULL;
	CHECK(e && e->type == SQUASH_JSON_FALSE);
	e = e ? e->next : NULL;
	CHECK(e && e->type == SQUASH_JSON_NULL && !e->next);
	CHECK_STR(squash_json_member(v, "s")->text, "q\"\\/\b\f\n\r\t \xc3\xa9 \xf0\x9f\x98\x80 \xc3\xa9");
	CHECK_STR(squash_json_member(v, "dup")->text, "last");
	CHECK(squash_json_member(v, "o")->type == SQUASH_JSON_OBJECT && !squash_json_member(v, "o")->child);
	CHECK(squash_json_member(v, "missing") == NULL);
	CHECK(squash_json_member(a, "a") == NULL); /* not an object */
	squash_json_free(v);
}

#define REFUSED(text, message)                                                               \
	do {                                                                                 \
		char e_[256] = "";                                                           \
		struct squash_json *v_ = squash_json_parse(text, sizeof(text) - 1, e_, sizeof e_); \
		CHECK(v_ == NULL);                                                           \
		squash_json_free(v_);                                                        \
		CHECK_CONTAINS(e_, message);                                                 \
	} while (0)

static void refuses_what_json_does_not_allow(void)
{
	REFUSED("", "line 1: expected a value");
	REFUSED("{\"a\": 1,}", "expected a member name");
	REFUSED("[1, 2,]", "not a JSON value");
	REFUSED("{\"a\" 1}", "expected ':'");
	REFUSED("{\"a\": 1\n\n \"b\": 2}", "line 3: expected ',' or '}'");
	REFUSED("[1 2]", "expected ',' or ']'");
	REFUSED("\"tab\there\"", "control character");
	REFUSED("\"\xc3\"", "not UTF-8");
	REFUSED("\"\xed\xa0\x80\"", "not UTF-8");  /* a surrogate written in UTF-8 */
	REFUSED("\"\xc0\xaf\"", "not UTF-8");      /* overlong '/' */
	REFUSED("\"a\\u0000b\"", "NUL");
	REFUSED("\"\\ud83d\"", "high surrogate");
	REFUSED("\"\\ude00\"", "low surrogate");
	REFUSED("\"\\u12\"", "four hexadecimal");
	REFUSED("\"\\x41\"", "unknown escape");
	REFUSED("\"open", "not closed");
	REFUSED("01", "text after the value");
	REFUSED("1.", "a number is written");
	REFUSED("-", "a number is written");
	REFUSED("1e", "a number is written");
	REFUSED("nul", "not a JSON value");
	REFUSED("// comment\n{}", "not a JSON value");
	REFUSED("{} {}", "text after the value");
	REFUSED("{'a': 1}", "member name");
}

static void keeps_to_its_bounds(void)
{
	char err[256];
	size_t depth = SQUASH_JSON_MAX_DEPTH, n;
	char *text = malloc(SQUASH_JSON_MAX_BYTES + 2);
	struct squash_json *v;

	if (!text)
		return;
	/* Nested as deep as allowed, then one more. */
	for (size_t k = depth; k <= depth + 1; k++) {
		memset(text, '[', k);
		memset(text + k, ']', k);
		v = squash_json_parse(text, 2 * k, err, sizeof err);
		CHECK((v != NULL) == (k == depth));
		squash_json_free(v);
	}
	CHECK_CONTAINS(err, "nested deeper");
	/* More values than allowed, in fewer bytes than allowed. */
	n = 0;
	text[n++] = '[';
	for (size_t i = 0; i < SQUASH_JSON_MAX_NODES; i++)
		n += (size_t)sprintf(text + n, "%s0", i ? "," : "");
	text[n++] = ']';
	v = squash_json_parse(text, n, err, sizeof err);
	CHECK(v == NULL);
	CHECK_CONTAINS(err, "more values");
	/* More bytes than allowed: refused before anything is read. */
	memset(text, ' ', SQUASH_JSON_MAX_BYTES + 1);
	text[0] = '0';
	v = squash_json_parse(text, SQUASH_JSON_MAX_BYTES + 1, err, sizeof err);
	CHECK(v == NULL);
	CHECK_CONTAINS(err, "more than the");
	free(text);
}

int main(void)
{
	reads_values_and_decodes_strings();
	refuses_what_json_does_not_allow();
	keeps_to_its_bounds();
	return unit_exit_code();
}

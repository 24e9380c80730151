/* Slurm-style patterns in image paths (%a %A %j %u %%), and how user text
 * is quoted back in messages. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "imagespec.h"
#include "path_pattern.h"
#include "quote.h"
#include "unit.h"

static char err[1024];
static char out[SQUASH_PATH_MAX];

static const struct squash_pattern_values array_task = {
	.have_job = true, .is_array = true, .job_id = 1234,
	.array_job_id = 1230, .array_task_id = 4, .user = "alice",
};
static const struct squash_pattern_values plain_job = {
	.have_job = true, .is_array = false, .job_id = 77, .user = "bob",
};
static const struct squash_pattern_values at_submit = {
	.have_job = false, .user = "carol",
};

static const char *expand(const char *text, const struct squash_pattern_values *v)
{
	err[0] = '\0';
	if (squash_pattern_expand(text, v, out, sizeof(out), err, sizeof(err)) < 0)
		return NULL;
	return out;
}

static void test_expand(void)
{
	CHECK_STR(expand("/d/img_%a.sqfs", &array_task), "/d/img_4.sqfs");
	CHECK_STR(expand("/d/%A/%a/%j/%u", &array_task), "/d/1230/4/1234/alice");
	CHECK_STR(expand("/d/img_%3a.sqfs", &array_task), "/d/img_004.sqfs");
	CHECK_STR(expand("/d/%10j", &array_task), "/d/0000001234");
	CHECK_STR(expand("/d/100%%.sqfs", &array_task), "/d/100%.sqfs");
	CHECK_STR(expand("/d/%%a", &array_task), "/d/%a");
	CHECK_STR(expand("/d/plain.sqfs", &array_task), "/d/plain.sqfs");
	/* Outside an array %A is the job id, as in Slurm; %a has no value. */
	CHECK_STR(expand("/d/%A_%j", &plain_job), "/d/77_77");
	CHECK(expand("/d/img_%a.sqfs", &plain_job) == NULL);
	CHECK_STR(err, "'/d/img_%a.sqfs' uses %a but job 77 is not part of a job array (submit it with --array, or use another pattern)");
	/* At submit only %u and %% are known. */
	CHECK_STR(expand("/home/%u/env.sqfs", &at_submit), "/home/carol/env.sqfs");
	CHECK(expand("/d/%j", &at_submit) == NULL);
	CHECK_CONTAINS(err, "cannot be expanded before the job exists");

	{
		char small[8];

		CHECK_INT(squash_pattern_expand("/d/%j", &array_task, small, sizeof(small),
						err, sizeof(err)), 0);
		CHECK_STR(small, "/d/1234");
		CHECK_INT(squash_pattern_expand("/d/x%j", &array_task, small, sizeof(small),
						err, sizeof(err)), -1);
		CHECK_CONTAINS(err, "expands to a path that is too long (at most 7 bytes)");
	}
}

static const char *syntax_error(const char *text)
{
	err[0] = '\0';
	CHECK_INT(squash_pattern_check(text, err, sizeof(err)), -1);
	return err;
}

static void test_syntax(void)
{
	CHECK_INT(squash_pattern_check("/d/%a_%A_%j_%u_%%_%2a", err, sizeof(err)), 0);
	CHECK_INT(squash_pattern_check("/d/plain", err, sizeof(err)), 0);
	CHECK_STR(syntax_error("/d/%x.sqfs"),
		  "'%x' in '/d/%x.sqfs' is not a known pattern; the known ones are %a (array task id), %A (array job id), %j (job id), %u (user name) and %% (a '%'), with an optional width of 1-10 for the numbers (%3a)");
	CHECK_CONTAINS(syntax_error("/d/100%"), "'%' in '/d/100%' is not a known pattern");
	CHECK_CONTAINS(syntax_error("/d/%11a"), "is not a known pattern");
	CHECK_CONTAINS(syntax_error("/d/%0a"), "is not a known pattern");
	CHECK_CONTAINS(syntax_error("/d/%3u"), "is not a known pattern");
	CHECK_CONTAINS(syntax_error("/d/%\x1b"), "\\x1b");
	CHECK(strchr(err, 0x1b) == NULL);

	CHECK(squash_pattern_needs_job("/d/%a"));
	CHECK(squash_pattern_needs_job("/d/%u/%4j"));
	CHECK(!squash_pattern_needs_job("/d/%u/%%a"));
	CHECK(!squash_pattern_needs_job("/d/plain"));
}

static void test_escape(void)
{
	char *e = squash_pattern_escape("/d/100%/x%a");

	CHECK_STR(e, "/d/100%%/x%%a");
	CHECK_STR(expand(e, &array_task), "/d/100%/x%a");
	free(e);
}

static void test_quote(void)
{
	char buf[16];

	CHECK_STR(squash_quote(buf, sizeof(buf), "a\x1b[1mb", 6), "a\\x1b[1mb");
	CHECK_STR(squash_quote(buf, sizeof(buf), "tab\there", 8), "tab\\x09here");
	CHECK_STR(squash_quote(buf, sizeof(buf), "back\\slash", 10), "back\\slash");
	/* Cut text says so, and never cuts an escape in half. */
	CHECK_STR(squash_quote(buf, sizeof(buf), "0123456789abcdefghij", 20), "0123456789ab...");
	CHECK_STR(squash_quote(buf, sizeof(buf), "0123456789\x01\x02\x03", 13), "0123456789...");
	CHECK_STR(squash_quote(buf, sizeof(buf), "0123456789abcde", 15), "0123456789abcde");
}

int main(void)
{
	test_expand();
	test_syntax();
	test_escape();
	test_quote();
	return unit_exit_code();
}

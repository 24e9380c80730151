/* Minimal assertions for the C unit tests: each failed check prints where
 * and what, the test keeps going, and unit_exit_code() reports the result
 * in automake's convention (0 pass, 1 fail, 77 skip). */
#ifndef SQUASH_UNIT_H
#define SQUASH_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_failures;
static int unit_checks;
static int unit_skips;

/* A part of the test that cannot run here (no munged, not root, a tool
 * missing): says why; the test then exits 77 (a skip) unless a check
 * failed, so a skip never counts as a pass. */
#define UNIT_SKIP(...)                                                       \
	do {                                                                 \
		unit_skips++;                                                \
		fprintf(stderr, "SKIP: " __VA_ARGS__);                       \
		fputc('\n', stderr);                                         \
	} while (0)

#define CHECK(cond)                                                          \
	do {                                                                 \
		unit_checks++;                                               \
		if (!(cond)) {                                               \
			unit_failures++;                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n",         \
				__FILE__, __LINE__, #cond);                  \
		}                                                            \
	} while (0)

#define CHECK_INT(actual, expected)                                          \
	do {                                                                 \
		long long unit_a = (long long)(actual);                      \
		long long unit_e = (long long)(expected);                    \
		unit_checks++;                                               \
		if (unit_a != unit_e) {                                      \
			unit_failures++;                                     \
			fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", \
				__FILE__, __LINE__, #actual, unit_a, unit_e); \
		}                                                            \
	} while (0)

#define CHECK_STR(actual, expected)                                          \
	do {                                                                 \
		const char *unit_a = (actual);                               \
		const char *unit_e = (expected);                             \
		unit_checks++;                                               \
		if (!unit_a || strcmp(unit_a, unit_e) != 0) {                \
			unit_failures++;                                     \
			fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", \
				__FILE__, __LINE__, #actual,                 \
				unit_a ? unit_a : "(null)", unit_e);         \
		}                                                            \
	} while (0)

/* Substring check, for messages whose tail carries strerror() text. */
#define CHECK_CONTAINS(haystack, needle)                                     \
	do {                                                                 \
		const char *unit_h = (haystack);                             \
		const char *unit_n = (needle);                               \
		unit_checks++;                                               \
		if (!unit_h || !strstr(unit_h, unit_n)) {                    \
			unit_failures++;                                     \
			fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", \
				__FILE__, __LINE__,                          \
				unit_h ? unit_h : "(null)", unit_n);         \
		}                                                            \
	} while (0)

static inline int unit_exit_code(void)
{
	fprintf(stderr, "%d checks, %d failed, %d part(s) skipped\n", unit_checks, unit_failures,
		unit_skips);
	return unit_failures ? 1 : unit_skips ? 77 : 0;
}

#endif

/* Slurm-style patterns in --squash-image paths, defined once for the
 * submit check (syntax, and what it can expand early) and the job prolog
 * (expansion per job and array task):
 *
 *     %a   array task id          (only in array jobs)
 *     %A   array's master job id  (the job id when the job is no array)
 *     %j   job id
 *     %u   user name
 *     %%   a '%'
 *
 * A width between '%' and a, A or j zero-pads the number (%3a -> 007), as
 * in Slurm's file name patterns. Any other '%' sequence is an error, so a
 * typo is refused instead of becoming part of a file name. */
#ifndef SQUASH_PATH_PATTERN_H
#define SQUASH_PATH_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Widest zero-padding accepted (%10a). */
#define SQUASH_PATTERN_MAX_WIDTH 10

struct squash_pattern_values {
	bool have_job;           /* false: %a %A %j are errors (not known yet) */
	bool is_array;           /* false: %a is an error */
	uint32_t job_id;         /* %j */
	uint32_t array_job_id;   /* %A when is_array */
	uint32_t array_task_id;  /* %a */
	const char *user;        /* %u; NULL: %u is an error */
};

/* Checks the syntax of every '%' in text. Returns 0, or -1 with err naming
 * the bad sequence and listing the known ones. */
int squash_pattern_check(const char *text, char *err, size_t errlen);

/* True when text (syntax already checked) uses %a, %A or %j: it can only
 * be expanded once the job and task are known. */
bool squash_pattern_needs_job(const char *text);

/* True when text (syntax already checked) uses %a or %A. */
bool squash_pattern_needs_array(const char *text);

/* Expands text into out. Returns 0, or -1 with err: bad syntax, a value
 * that is not known (see struct), or a result of outlen bytes or more. */
int squash_pattern_expand(const char *text, const struct squash_pattern_values *v,
			  char *out, size_t outlen, char *err, size_t errlen);

/* Copy of a literal path with every '%' doubled, so that expanding it
 * gives the path back. malloc'd; NULL when out of memory. */
char *squash_pattern_escape(const char *literal);

#endif

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "path_pattern.h"
#include "quote.h"

#define KNOWN "%%a (array task id), %%A (array job id), %%j (job id), %%u (user name) and %%%% (a '%%')"

/* One '%' sequence starting at p ('%'): its conversion character and
 * width (0 when none); returns its length, or 0 when it is malformed. */
static size_t read_sequence(const char *p, char *conv, unsigned *width)
{
	size_t i = 1;
	unsigned w = 0;

	while (p[i] >= '0' && p[i] <= '9' && i <= 3) {
		w = w * 10 + (unsigned)(p[i] - '0');
		i++;
	}
	*conv = p[i];
	*width = w;
	if (p[i] == '\0')
		return 0;
	if (p[i] == 'a' || p[i] == 'A' || p[i] == 'j')
		return (i > 1 && (w == 0 || w > SQUASH_PATTERN_MAX_WIDTH)) ? 0 : i + 1;
	if (p[i] == 'u' || p[i] == '%')
		return i == 1 ? i + 1 : 0; /* no width on names and '%' */
	return 0;
}

static void bad_sequence(const char *text, const char *p, char *err, size_t errlen)
{
	char shown[SQUASH_QUOTE_BUF];
	size_t n = 1;

	/* The sequence as far as its conversion character. */
	while (p[n] >= '0' && p[n] <= '9')
		n++;
	if (p[n])
		n++;

	squash_errf(err, errlen,
		    "'%s' in '%s' is not a known pattern; the known ones are " KNOWN
		    ", with an optional width of 1-%d for the numbers (%%3a)",
		    squash_quote(shown, sizeof shown / 2, p, n),
		    squash_quote(shown + sizeof shown / 2, sizeof shown / 2, text,
				 strlen(text)),
		    SQUASH_PATTERN_MAX_WIDTH);
}

int squash_pattern_check(const char *text, char *err, size_t errlen)
{
	for (const char *p = strchr(text, '%'); p; p = strchr(p, '%')) {
		char conv;
		unsigned width;
		size_t n = read_sequence(p, &conv, &width);

		if (n == 0) {
			bad_sequence(text, p, err, errlen);
			return -1;
		}
		p += n;
	}
	return 0;
}

/* True when text uses one of the conversions in convs. */
static bool uses(const char *text, const char *convs)
{
	for (const char *p = strchr(text, '%'); p; p = strchr(p, '%')) {
		char conv;
		unsigned width;
		size_t n = read_sequence(p, &conv, &width);

		if (n == 0)
			return false;
		if (conv != '%' && strchr(convs, conv))
			return true;
		p += n;
	}
	return false;
}

bool squash_pattern_needs_array(const char *text)
{
	return uses(text, "aA");
}

bool squash_pattern_needs_job(const char *text)
{
	return uses(text, "aAj");
}

int squash_pattern_expand(const char *text, const struct squash_pattern_values *v,
			  char *out, size_t outlen, char *err, size_t errlen)
{
	char shown[SQUASH_QUOTE_BUF];
	size_t used = 0;

	if (outlen == 0)
		return -1;
	for (const char *p = text; *p;) {
		char piece[32];
		const char *add = piece;
		size_t addlen;

		if (*p != '%') {
			size_t n = strcspn(p, "%");

			add = p;
			addlen = n;
			p += n;
		} else {
			char conv;
			unsigned width;
			size_t n = read_sequence(p, &conv, &width);
			unsigned long long num = 0;

			if (n == 0) {
				bad_sequence(text, p, err, errlen);
				return -1;
			}
			p += n;
			if ((conv == 'a' || conv == 'A' || conv == 'j') && !v->have_job) {
				squash_errf(err, errlen, "%%%c in '%s' cannot be expanded before the job exists",
					    conv, squash_quote(shown, sizeof shown, text, strlen(text)));
				return -1;
			}
			switch (conv) {
			case '%':
				add = "%";
				break;
			case 'u':
				if (!v->user) {
					squash_errf(err, errlen, "%%u in '%s': the user name is not known",
						    squash_quote(shown, sizeof shown, text, strlen(text)));
					return -1;
				}
				add = v->user;
				break;
			case 'a':
				if (!v->is_array) {
					squash_errf(err, errlen,
						    "'%s' uses %%a but job %u is not part of a job array (submit it with --array, or use another pattern)",
						    squash_quote(shown, sizeof shown, text, strlen(text)),
						    v->job_id);
					return -1;
				}
				num = v->array_task_id;
				break;
			case 'A':
				num = v->is_array ? v->array_job_id : v->job_id;
				break;
			case 'j':
				num = v->job_id;
				break;
			}
			if (conv == 'a' || conv == 'A' || conv == 'j') {
				snprintf(piece, sizeof piece, "%0*llu", (int)width, num);
				add = piece;
			}
			addlen = strlen(add);
		}
		if (used + addlen >= outlen) {
			squash_errf(err, errlen, "'%s' expands to a path that is too long (at most %zu bytes)",
				    squash_quote(shown, sizeof shown, text, strlen(text)), outlen - 1);
			return -1;
		}
		memcpy(out + used, add, addlen);
		used += addlen;
	}
	out[used] = '\0';
	return 0;
}

char *squash_pattern_escape(const char *literal)
{
	size_t n = strlen(literal);
	char *out = malloc(2 * n + 1);
	char *q = out;

	if (!out)
		return NULL;
	for (const char *p = literal; *p; p++) {
		if (*p == '%')
			*q++ = '%';
		*q++ = *p;
	}
	*q = '\0';
	return out;
}

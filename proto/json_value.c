/* A bounded, strict JSON reader (json_value.h). */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "json_value.h"
#include "utf8_text.h"

struct parser {
	const char *p, *start, *end;
	size_t nodes;
	char *err;
	size_t errlen;
	bool failed, out_of_memory;
};

/* The line of the parser's position, for messages. */
static unsigned line_of(const struct parser *ps, const char *at)
{
	unsigned line = 1;

	for (const char *q = ps->start; q < at && q < ps->end; q++)
		line += *q == '\n';
	return line;
}

static void fail(struct parser *ps, const char *what)
{
	if (ps->failed)
		return;
	ps->failed = true;
	if (ps->p >= ps->end)
		squash_errf(ps->err, ps->errlen, "line %u: %s (the text ends there)", line_of(ps, ps->p), what);
	else
		squash_errf(ps->err, ps->errlen, "line %u: %s", line_of(ps, ps->p), what);
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static struct squash_json *new_node(struct parser *ps, enum squash_json_type type)
{
	struct squash_json *v;

	if (ps->nodes >= SQUASH_JSON_MAX_NODES) {
		fail(ps, "more values than a metadata file may hold");
		return NULL;
	}
	v = calloc(1, sizeof *v);
	if (!v) {
		ps->out_of_memory = true;
		fail(ps, "out of memory");
		return NULL;
	}
	ps->nodes++;
	v->type = type;
	return v;
}

static int hex4(const char *p, uint32_t *out)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *w, uint32_t cp)
{
	if (cp < 0x80) {
		w[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		w[0] = (char)(0xc0 | cp >> 6);
		w[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		w[0] = (char)(0xe0 | cp >> 12);
		w[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		w[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	w[0] = (char)(0xf0 | cp >> 18);
	w[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	w[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	w[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* One \u escape (ps->p after the 'u'), a surrogate pair taken whole. */
static int unicode_escape(struct parser *ps, uint32_t *cp)
{
	uint32_t lo;

	if (ps->end - ps->p < 4 || hex4(ps->p, cp)) {
		fail(ps, "a \\u escape needs four hexadecimal digits");
		return -1;
	}
	ps->p += 4;
	if (*cp >= 0xdc00 && *cp <= 0xdfff) {
		fail(ps, "a \\u escape holds a lone low surrogate");
		return -1;
	}
	if (*cp >= 0xd800 && *cp <= 0xdbff) {
		if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, &lo) ||
		    lo < 0xdc00 || lo > 0xdfff) {
			fail(ps, "a \\u escape holds a high surrogate without its low one");
			return -1;
		}
		ps->p += 6;
		*cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (*cp == 0) {
		fail(ps, "a string holds a NUL character (\\u0000)");
		return -1;
	}
	return 0;
}

/* A string (ps->p on its opening quote), decoded; NULL on failure. The
 * decoded text is never longer than the written one. */
static char *parse_string(struct parser *ps)
{
	const char *q = ++ps->p;
	char *out, *w;

	while (q < ps->end && *q != '"')
		q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
	if (q >= ps->end) {
		ps->p = ps->end;
		fail(ps, "a string is not closed");
		return NULL;
	}
	out = w = malloc((size_t)(q - ps->p) + 1);
	if (!out) {
		ps->out_of_memory = true;
		fail(ps, "out of memory");
		return NULL;
	}
	while (*ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;

		if (c < 0x20) {
			fail(ps, "a string holds a control character (JSON writes them as escapes)");
			goto bad;
		}
		if (c >= 0x80) {
			uint32_t cp;
			size_t n = squash_utf8_sequence((const unsigned char *)ps->p, (size_t)(ps->end - ps->p), &cp);
			if (!n) {
				fail(ps, "a string is not UTF-8");
				goto bad;
			}
			memcpy(w, ps->p, n);
			w += n;
			ps->p += n;
			continue;
		}
		if (c != '\\') {
			*w++ = (char)c;
			ps->p++;
			continue;
		}
		ps->p++;
		const char *simple = strchr("\"\\/bfnrt", *ps->p);
		if (*ps->p && simple) {
			static const char decoded[] = "\"\\/\b\f\n\r\t";
			*w++ = decoded[simple - "\"\\/bfnrt"];
			ps->p++;
		} else if (*ps->p == 'u') {
			uint32_t cp;
			ps->p++;
			if (unicode_escape(ps, &cp))
				goto bad;
			w += put_utf8(w, cp);
		} else {
			fail(ps, "a string holds an unknown escape");
			goto bad;
		}
	}
	ps->p++;
	*w = '\0';
	return out;
bad:
	free(out);
	return NULL;
}

/* A number as RFC 8259 writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static char *parse_number(struct parser *ps)
{
	const char *s = ps->p, *q = ps->p;
	char *out;

#define DIGITS(q) ((q) < ps->end && *(q) >= '0' && *(q) <= '9')
	if (q < ps->end && *q == '-')
		q++;
	if (!DIGITS(q))
		goto bad;
	if (*q == '0')
		q++;
	else
		while (DIGITS(q))
			q++;
	if (q < ps->end && *q == '.') {
		q++;
		if (!DIGITS(q))
			goto bad;
		while (DIGITS(q))
			q++;
	}
	if (q < ps->end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < ps->end && (*q == '+' || *q == '-'))
			q++;
		if (!DIGITS(q))
			goto bad;
		while (DIGITS(q))
			q++;
	}
#undef DIGITS
	ps->p = q;
	out = strndup(s, (size_t)(q - s));
	if (!out) {
		ps->out_of_memory = true;
		fail(ps, "out of memory");
	}
	return out;
bad:
	ps->p = q;
	fail(ps, "not a JSON value (a number is written -?DIGITS[.DIGITS][e[+-]DIGITS])");
	return NULL;
}

static struct squash_json *parse_value(struct parser *ps, unsigned depth);

/* The elements of an array or the members of an object (ps->p after its
 * opening bracket), appended to v. */
static int parse_elements(struct parser *ps, struct squash_json *v, unsigned depth)
{
	bool object = v->type == SQUASH_JSON_OBJECT;
	char close = object ? '}' : ']';
	struct squash_json **tail = &v->child;

	skip_space(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;

		skip_space(ps);
		if (object) {
			if (ps->p >= ps->end || *ps->p != '"') {
				fail(ps, "expected a member name in quotes");
				return -1;
			}
			if (!(key = parse_string(ps)))
				return -1;
			skip_space(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				free(key);
				fail(ps, "expected ':' after a member name");
				return -1;
			}
			ps->p++;
		}
		struct squash_json *e = parse_value(ps, depth + 1);
		if (!e) {
			free(key);
			return -1;
		}
		e->key = key;
		*tail = e;
		tail = &e->next;
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return 0;
		}
		fail(ps, object ? "expected ',' or '}' after a member" : "expected ',' or ']' after an element");
		return -1;
	}
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
		return false;
	ps->p += n;
	return true;
}

static struct squash_json *parse_value(struct parser *ps, unsigned depth)
{
	struct squash_json *v = NULL;

	skip_space(ps);
	if (depth >= SQUASH_JSON_MAX_DEPTH && ps->p < ps->end && (*ps->p == '[' || *ps->p == '{')) {
		fail(ps, "nested deeper than a metadata file may be");
		return NULL;
	}
	if (ps->p >= ps->end) {
		fail(ps, "expected a value");
		return NULL;
	}
	switch (*ps->p) {
	case '{':
	case '[':
		if (!(v = new_node(ps, *ps->p == '{' ? SQUASH_JSON_OBJECT : SQUASH_JSON_ARRAY)))
			return NULL;
		ps->p++;
		if (parse_elements(ps, v, depth)) {
			squash_json_free(v);
			return NULL;
		}
		return v;
	case '"':
		if (!(v = new_node(ps, SQUASH_JSON_STRING)))
			return NULL;
		if (!(v->text = parse_string(ps))) {
			squash_json_free(v);
			return NULL;
		}
		return v;
	case 'n':
		if (literal(ps, "null"))
			return new_node(ps, SQUASH_JSON_NULL);
		break;
	case 't':
		if (literal(ps, "true"))
			return new_node(ps, SQUASH_JSON_TRUE);
		break;
	case 'f':
		if (literal(ps, "false"))
			return new_node(ps, SQUASH_JSON_FALSE);
		break;
	default:
		if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
			if (!(v = new_node(ps, SQUASH_JSON_NUMBER)))
				return NULL;
			if (!(v->text = parse_number(ps))) {
				squash_json_free(v);
				return NULL;
			}
			return v;
		}
	}
	fail(ps, "not a JSON value");
	return NULL;
}

struct squash_json *squash_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct parser ps = { .p = text, .start = text, .end = text + len, .err = err, .errlen = errlen };
	struct squash_json *v;

	if (len > SQUASH_JSON_MAX_BYTES) {
		squash_errf(err, errlen, "%zu bytes, more than the %d a metadata file may have", len,
			    SQUASH_JSON_MAX_BYTES);
		errno = EINVAL;
		return NULL;
	}
	if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
		ps.p += 3; /* a byte order mark, which some editors write */
	v = parse_value(&ps, 0);
	if (v) {
		skip_space(&ps);
		if (ps.p == ps.end)
			return v;
		fail(&ps, "text after the value");
		squash_json_free(v);
	}
	errno = ps.out_of_memory ? ENOMEM : EINVAL;
	return NULL;
}

/* Iterative over siblings, recursive over children: depth is bounded. */
void squash_json_free(struct squash_json *v)
{
	while (v) {
		struct squash_json *next = v->next;

		squash_json_free(v->child);
		free(v->text);
		free(v->key);
		free(v);
		v = next;
	}
}

const struct squash_json *squash_json_member(const struct squash_json *v, const char *key)
{
	const struct squash_json *found = NULL;

	if (!v || v->type != SQUASH_JSON_OBJECT)
		return NULL;
	for (const struct squash_json *m = v->child; m; m = m->next)
		if (!strcmp(m->key, key))
			found = m;
	return found;
}

#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "imagespec.h"

#include "quote.h"

#define ESCAPE '\\'

/* True when c may follow the escape character. */
static bool escapable(char c)
{
	return c == ESCAPE || c == ',' || c == ':';
}

/* The first unescaped sep in [p, end), or end. Escapes are not validated
 * here: a trailing backslash simply ends the scan. */
static const char *find_unescaped(const char *p, const char *end, char sep)
{
	while (p < end) {
		if (*p == ESCAPE) {
			p += (p + 1 < end) ? 2 : 1;
			continue;
		}
		if (*p == sep)
			return p;
		p++;
	}
	return end;
}

size_t squash_spec_unescaped_len(const char *text, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++, n++)
		if (text[i] == ESCAPE && i + 1 < len)
			i++;
	return n;
}

char *squash_spec_unescape(const char *text, size_t len)
{
	char *out = malloc(squash_spec_unescaped_len(text, len) + 1);
	char *p = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (text[i] == ESCAPE && i + 1 < len)
			i++;
		*p++ = text[i];
	}
	*p = '\0';
	return out;
}

/* Quotes an item for a message (control characters as \xNN). */
static const char *show(char *buf, size_t buflen, const char *item, size_t len)
{
	return squash_quote(buf, buflen, item, len);
}

int squash_spec_split(const char *item, size_t len, size_t index,
		      struct squash_spec_fields *out, char *err, size_t errlen)
{
	const char *end = item + len;
	const char *p = item;
	char shown[SQUASH_QUOTE_BUF];

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < len; i++) {
		if (item[i] != ESCAPE)
			continue;
		if (i + 1 == len || !escapable(item[i + 1])) {
			squash_errf(err, errlen,
				    "item %zu ('%s'): a '\\' must be followed by ',' ':' or '\\' (write '\\,' for a ',' and '\\:' for a ':' inside a path, '\\\\' for a '\\')",
				    index, show(shown, sizeof shown, item, len));
			return -1;
		}
		i++;
	}
	for (;;) {
		const char *sep = find_unescaped(p, end, ':');

		if (out->count == SQUASH_SPEC_MAX_FIELDS) {
			squash_errf(err, errlen,
				    "item %zu ('%s'): too many ':' (write '\\:' for a ':' inside a path)",
				    index, show(shown, sizeof shown, item, len));
			return -1;
		}
		out->field[out->count].text = p;
		out->field[out->count].len = (size_t)(sep - p);
		out->count++;
		if (sep == end)
			return 0;
		p = sep + 1;
	}
}

static size_t count_items(const char *text)
{
	const char *end = text + strlen(text);
	size_t n = 1;

	for (const char *p = text; (p = find_unescaped(p, end, ',')) < end; p++)
		n++;
	return n;
}

/* Checks one escaped path field of item number `index` (1-based); `what`
 * is "image" or "target". */
static int check_path(const char *text, size_t len, const char *what,
		      size_t index, const char *item, size_t item_len,
		      char *err, size_t errlen)
{
	size_t plain = squash_spec_unescaped_len(text, len);
	char shown[SQUASH_QUOTE_BUF];

	if (plain == 0) {
		squash_errf(err, errlen, "item %zu ('%s'): empty %s path", index,
			    show(shown, sizeof shown, item, item_len), what);
		return -1;
	}
	if (plain >= SQUASH_PATH_MAX) {
		squash_errf(err, errlen,
			    "item %zu: %s path is too long (%zu bytes, at most %d)",
			    index, what, plain, SQUASH_PATH_MAX - 1);
		return -1;
	}
	return 0;
}

/* The first control character in s[0..len), or -1. */
static int first_control_char(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (squash_is_control(c))
			return c;
	}
	return -1;
}

/* The flag field after TARGET: "rw", or "rw=DIR" (DIR escaped). */
static int parse_flag(const char *text, size_t len, size_t index, const char *item,
		      size_t item_len, struct squash_image_spec *spec, char *err, size_t errlen)
{
	char shown[SQUASH_QUOTE_BUF], flag[SQUASH_QUOTE_BUF];

	if (len < 2 || memcmp(text, "rw", 2) || (len > 2 && text[2] != '=')) {
		squash_errf(err, errlen,
			    "item %zu ('%s'): unknown flag '%s' after the target (the only flag is rw or rw=DIR; write '\\:' for a ':' inside a path)",
			    index, show(shown, sizeof shown, item, item_len),
			    show(flag, sizeof flag, text, len));
		return -1;
	}
	spec->writable = true;
	if (len == 2)
		return 0;
	if (check_path(text + 3, len - 3, "upper directory", index, item, item_len, err,
		       errlen) < 0)
		return -1;
	if (squash_spec_unescaped_len(text + 3, len - 3) >= SQUASH_UPPER_MAX) {
		squash_errf(err, errlen, "item %zu: upper directory path is too long (%zu bytes, at most %d)",
			    index, squash_spec_unescaped_len(text + 3, len - 3), SQUASH_UPPER_MAX - 1);
		return -1;
	}
	spec->upper = squash_spec_unescape(text + 3, len - 3);
	if (!spec->upper) {
		squash_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int parse_item(const char *item, size_t item_len, size_t index,
		      struct squash_image_spec *spec, char *err, size_t errlen)
{
	struct squash_spec_fields f;
	char shown[SQUASH_QUOTE_BUF];
	int ctl;

	if (item_len == 0) {
		squash_errf(err, errlen, "item %zu is empty (stray ',')", index);
		return -1;
	}
	ctl = first_control_char(item, item_len);
	if (ctl >= 0) {
		/* Shown escaped: the raw byte could drive the terminal. */
		squash_errf(err, errlen,
			    "item %zu ('%s') contains a control character (\\x%02x); paths may not contain control characters",
			    index, show(shown, sizeof shown, item, item_len), ctl);
		return -1;
	}
	if (squash_spec_split(item, item_len, index, &f, err, errlen) < 0)
		return -1;
	if (f.count > 3) {
		squash_errf(err, errlen,
			    "item %zu ('%s'): more than two ':' (the form is IMAGE:TARGET[:rw]; write '\\:' for a ':' inside a path)",
			    index, show(shown, sizeof shown, item, item_len));
		return -1;
	}
	if (check_path(f.field[0].text, f.field[0].len, "image", index, item,
		       item_len, err, errlen) < 0)
		return -1;
	if (f.count == 3 && parse_flag(f.field[2].text, f.field[2].len, index, item, item_len,
				       spec, err, errlen) < 0)
		return -1;
	/* IMAGE::rw keeps the default target */
	if (f.count == 2 || (f.count == 3 && f.field[1].len > 0)) {
		if (check_path(f.field[1].text, f.field[1].len, "target", index,
			       item, item_len, err, errlen) < 0)
			return -1;
		spec->target = squash_spec_unescape(f.field[1].text, f.field[1].len);
		if (!spec->target)
			goto oom;
	}
	spec->image = squash_spec_unescape(f.field[0].text, f.field[0].len);
	if (!spec->image)
		goto oom;
	return 0;
oom:
	squash_errf(err, errlen, "out of memory");
	return -1;
}

int squash_imagespec_parse(const char *text, struct squash_image_list *out,
			   char *err, size_t errlen)
{
	const char *end;
	size_t items;
	const char *p;

	memset(out, 0, sizeof(*out));
	if (!text || !*text) {
		squash_errf(err, errlen, "no image given");
		return -1;
	}
	if (strnlen(text, SQUASH_OPTION_MAX + 1) > SQUASH_OPTION_MAX) {
		squash_errf(err, errlen, "the image list is too long (%zu bytes, at most %d: "
			    "tasks get it in one environment variable)",
			    strlen(text), SQUASH_OPTION_MAX);
		return -1;
	}
	items = count_items(text);
	if (items > SQUASH_MAX_IMAGES) {
		squash_errf(err, errlen, "too many images (%zu, at most %d per job)",
			    items, SQUASH_MAX_IMAGES);
		return -1;
	}
	end = text + strlen(text);
	for (p = text;;) {
		const char *comma = find_unescaped(p, end, ',');

		if (parse_item(p, (size_t)(comma - p), out->count + 1,
			       &out->items[out->count], err, errlen) < 0) {
			/* parse_item may have set target before failing */
			out->count++;
			squash_imagespec_free(out);
			return -1;
		}
		out->count++;
		if (comma == end)
			break;
		p = comma + 1;
	}
	return 0;
}

void squash_imagespec_free(struct squash_image_list *list)
{
	size_t i;

	for (i = 0; i < list->count && i < SQUASH_MAX_IMAGES; i++) {
		free(list->items[i].image);
		free(list->items[i].target);
		free(list->items[i].upper);
	}
	memset(list, 0, sizeof(*list));
}

static size_t escaped_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += escapable(*s) ? 2 : 1;
	return n;
}

static char *put_escaped(char *p, const char *s)
{
	for (; *s; s++) {
		if (escapable(*s))
			*p++ = ESCAPE;
		*p++ = *s;
	}
	return p;
}

char *squash_imagespec_format(const struct squash_image_list *list)
{
	size_t len = 1;
	size_t i;
	char *out;
	char *p;

	for (i = 0; i < list->count; i++) {
		len += escaped_len(list->items[i].image) + 1;
		if (list->items[i].target)
			len += escaped_len(list->items[i].target) + 1;
		if (list->items[i].writable)
			len += 4; /* ":rw", and "::rw" without a target */
		if (list->items[i].upper)
			len += escaped_len(list->items[i].upper) + 1; /* "=DIR" */
	}
	out = malloc(len);
	if (!out)
		return NULL;
	p = out;
	for (i = 0; i < list->count; i++) {
		const struct squash_image_spec *s = &list->items[i];

		if (i > 0)
			*p++ = ',';
		p = put_escaped(p, s->image);
		if (s->target) {
			*p++ = ':';
			p = put_escaped(p, s->target);
		}
		if (s->writable) {
			if (!s->target)
				*p++ = ':';
			memcpy(p, ":rw", 3);
			p += 3;
			if (s->upper) {
				*p++ = '=';
				p = put_escaped(p, s->upper);
			}
		}
	}
	*p = '\0';
	return out;
}

static size_t strip_image_suffix(const char *name, size_t len)
{
	static const char *const suffixes[] = { ".sqfs", ".squashfs", ".sqsh",
						".sfs" };
	size_t i;

	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		size_t slen = strlen(suffixes[i]);

		if (len >= slen && memcmp(name + len - slen, suffixes[i], slen) == 0)
			return len - slen;
	}
	return len;
}

int squash_default_target(const char *image, const char *base, char *out,
			  size_t outlen, char *err, size_t errlen)
{
	const char *slash = strrchr(image, '/');
	const char *name = slash ? slash + 1 : image;
	size_t name_len = strip_image_suffix(name, strlen(name));
	size_t base_len = strlen(base);
	size_t total;

	if (squash_has_control_char(image)) {
		squash_errf(err, errlen, "image path contains a control character");
		return -1;
	}
	if (name_len == 0 || (name_len == 1 && name[0] == '.') ||
	    (name_len == 2 && name[0] == '.' && name[1] == '.')) {
		squash_errf(err, errlen,
			    "cannot derive a mount point from '%.*s'; give one as IMAGE:TARGET",
			    SQUASH_QUOTE_MAX, image);
		return -1;
	}
	/* "/squash/" and "/squash" give the same "/squash/NAME". */
	while (base_len > 0 && base[base_len - 1] == '/')
		base_len--;
	total = base_len + 1 + name_len;
	if (outlen == 0 || total >= outlen || total >= SQUASH_PATH_MAX) {
		squash_errf(err, errlen,
			    "mount point for '%.*s' would be too long (%zu bytes, at most %zu)",
			    SQUASH_QUOTE_MAX, image, total,
			    (outlen > 0 && outlen < SQUASH_PATH_MAX ? outlen : SQUASH_PATH_MAX) - 1);
		return -1;
	}
	memcpy(out, base, base_len);
	out[base_len] = '/';
	memcpy(out + base_len + 1, name, name_len);
	out[total] = '\0';
	return 0;
}

#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "imagespec.h"

/* Longest piece of user text quoted back in a message. */
#define QUOTE_MAX 200

static size_t count_items(const char *text)
{
	size_t n = 1;

	for (; *text; text++)
		if (*text == ',')
			n++;
	return n;
}

/* Checks one path of item number `index` (1-based); `what` is "image" or
 * "target". The item holds no control characters by now, so it may be
 * quoted back. */
static int check_path(size_t len, const char *what, size_t index,
		      const char *item, size_t item_len, char *err,
		      size_t errlen)
{
	if (len == 0) {
		squash_errf(err, errlen, "item %zu ('%.*s'): empty %s path",
			    index, (int)(item_len < QUOTE_MAX ? item_len : QUOTE_MAX),
			    item, what);
		return -1;
	}
	if (len >= SQUASH_PATH_MAX) {
		squash_errf(err, errlen,
			    "item %zu: %s path is too long (%zu bytes, at most %d)",
			    index, what, len, SQUASH_PATH_MAX - 1);
		return -1;
	}
	return 0;
}

static bool has_control_char(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return true;
	}
	return false;
}

static int parse_item(const char *item, size_t item_len, size_t index,
		      struct squash_image_spec *spec, char *err, size_t errlen)
{
	const char *colon = memchr(item, ':', item_len);
	size_t image_len = colon ? (size_t)(colon - item) : item_len;

	if (item_len == 0) {
		squash_errf(err, errlen, "item %zu is empty (stray ',')", index);
		return -1;
	}
	if (has_control_char(item, item_len)) {
		/* Not echoed: the message would carry the byte. */
		squash_errf(err, errlen, "item %zu contains a control character",
			    index);
		return -1;
	}
	if (check_path(image_len, "image", index, item, item_len, err,
		       errlen) < 0)
		return -1;
	if (colon) {
		const char *target = colon + 1;
		size_t target_len = item_len - image_len - 1;
		const char *flag = memchr(target, ':', target_len);

		if (flag) {
			/* IMAGE:TARGET:rw (or IMAGE::rw: default target) */
			size_t flag_len = target_len - (size_t)(flag - target) - 1;

			target_len = (size_t)(flag - target);
			flag++;
			if (memchr(flag, ':', flag_len)) {
				squash_errf(err, errlen,
					    "item %zu ('%.*s'): more than two ':' (paths may not contain ':')",
					    index, (int)(item_len < QUOTE_MAX ? item_len : QUOTE_MAX),
					    item);
				return -1;
			}
			if (flag_len < 2 || memcmp(flag, "rw", 2) || (flag_len > 2 && flag[2] != '=')) {
				squash_errf(err, errlen,
					    "item %zu ('%.*s'): unknown flag '%.*s' after the target "
					    "(the only flag is rw or rw=DIR; paths may not contain ':')",
					    index, (int)(item_len < QUOTE_MAX ? item_len : QUOTE_MAX),
					    item, (int)(flag_len < QUOTE_MAX ? flag_len : QUOTE_MAX), flag);
				return -1;
			}
			spec->writable = true;
			if (flag_len > 2) {
				/* rw=DIR: the upper directory that keeps the changes */
				if (check_path(flag_len - 3, "upper directory", index, item, item_len,
					       err, errlen) < 0)
					return -1;
				if (flag_len - 3 >= SQUASH_UPPER_MAX) {
					squash_errf(err, errlen,
						    "item %zu: upper directory path is too long (%zu bytes, at most %d)",
						    index, flag_len - 3, SQUASH_UPPER_MAX - 1);
					return -1;
				}
				spec->upper = strndup(flag + 3, flag_len - 3);
				if (!spec->upper)
					goto oom;
			}
		}
		if ((!flag || target_len) &&
		    check_path(target_len, "target", index, item, item_len,
			       err, errlen) < 0)
			return -1;
		if (target_len) {
			spec->target = strndup(target, target_len);
			if (!spec->target)
				goto oom;
		}
	}
	spec->image = strndup(item, image_len);
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
	size_t items;
	const char *p;

	memset(out, 0, sizeof(*out));
	if (!text || !*text) {
		squash_errf(err, errlen, "no image given");
		return -1;
	}
	if (strnlen(text, SQUASH_OPTION_MAX + 1) > SQUASH_OPTION_MAX) {
		squash_errf(err, errlen, "option is too long (at most %d bytes)",
			    SQUASH_OPTION_MAX);
		return -1;
	}
	items = count_items(text);
	if (items > SQUASH_MAX_IMAGES) {
		squash_errf(err, errlen, "too many images (%zu, at most %d)",
			    items, SQUASH_MAX_IMAGES);
		return -1;
	}
	for (p = text;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (parse_item(p, len, out->count + 1, &out->items[out->count],
			       err, errlen) < 0) {
			/* parse_item may have set target before failing */
			out->count++;
			squash_imagespec_free(out);
			return -1;
		}
		out->count++;
		if (!comma)
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

char *squash_imagespec_format(const struct squash_image_list *list)
{
	size_t len = 1;
	size_t i;
	char *out;
	char *p;

	for (i = 0; i < list->count; i++) {
		len += strlen(list->items[i].image) + 1;
		if (list->items[i].target)
			len += strlen(list->items[i].target) + 1;
		if (list->items[i].writable)
			len += 4; /* ":rw", and "::rw" without a target */
		if (list->items[i].upper)
			len += strlen(list->items[i].upper) + 1; /* "=DIR" */
	}
	out = malloc(len);
	if (!out)
		return NULL;
	p = out;
	for (i = 0; i < list->count; i++) {
		const struct squash_image_spec *s = &list->items[i];
		size_t n;

		if (i > 0)
			*p++ = ',';
		n = strlen(s->image);
		memcpy(p, s->image, n);
		p += n;
		if (s->target) {
			*p++ = ':';
			n = strlen(s->target);
			memcpy(p, s->target, n);
			p += n;
		}
		if (s->writable) {
			if (!s->target)
				*p++ = ':';
			memcpy(p, ":rw", 3);
			p += 3;
			if (s->upper) {
				*p++ = '=';
				n = strlen(s->upper);
				memcpy(p, s->upper, n);
				p += n;
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
			    QUOTE_MAX, image);
		return -1;
	}
	/* "/squash/" and "/squash" give the same "/squash/NAME". */
	while (base_len > 0 && base[base_len - 1] == '/')
		base_len--;
	total = base_len + 1 + name_len;
	if (outlen == 0 || total >= outlen || total >= SQUASH_PATH_MAX) {
		squash_errf(err, errlen,
			    "mount point for '%.*s' would be too long (%zu bytes, at most %zu)",
			    QUOTE_MAX, image, total,
			    (outlen > 0 && outlen < SQUASH_PATH_MAX ? outlen : SQUASH_PATH_MAX) - 1);
		return -1;
	}
	memcpy(out, base, base_len);
	out[base_len] = '/';
	memcpy(out + base_len + 1, name, name_len);
	out[total] = '\0';
	return 0;
}

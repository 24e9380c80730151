#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog_index.h"
#include "utf8_text.h"
#include "errmsg.h"
#include "quote.h"
#include "read_full.h"

static bool name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '+' || c == '-';
}

/* Bytes of the printable character at s (of len bytes), 0 when none. */
static size_t printable_len(const char *s, size_t len)
{
	unsigned char c = (unsigned char)s[0];

	return c < 0x80 ? !squash_is_control(c) : squash_utf8_printable((const unsigned char *)s, len);
}

/* The character at s (of len bytes) as a message may show it: itself when
 * printable, else its first byte as \xNN (never raw to a terminal). */
static const char *shown_char(const char *s, size_t len, char out[8])
{
	unsigned char c = (unsigned char)s[0];
	size_t n = printable_len(s, len);

	if (n == 0)
		snprintf(out, 8, "\\x%02x", c);
	else
		snprintf(out, 8, "%.*s", (int)n, s);
	return out;
}

/* s (len bytes) as a message may show it: printable characters as they
 * are, every other byte as \xNN, cut with "..." to fit out. */
static const char *shown_text(const char *s, size_t len, char *out, size_t outlen)
{
	size_t used = 0;

	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		size_t n = printable_len(s + i, len - i);
		size_t need = n ? n : 4;

		if (used + need + 4 > outlen) {
			snprintf(out + used, outlen - used, "...");
			return out;
		}
		if (n)
			memcpy(out + used, s + i, n);
		else
			snprintf(out + used, 5, "\\x%02x", c);
		used += need;
		i += n ? n : 1;
	}
	out[used] = '\0';
	return out;
}

bool squash_catalog_name_ok(const char *s, const char *what, char *err, size_t errlen)
{
	char shown[SQUASH_QUOTE_BUF], bad[8];
	size_t len = strnlen(s, SQUASH_CATALOG_NAME_MAX + 1);

	if (len == 0) {
		squash_errf(err, errlen, "empty %s", what);
		return false;
	}
	if (len > SQUASH_CATALOG_NAME_MAX) {
		squash_errf(err, errlen, "%s '%s' is too long (at most %d characters)", what,
			    shown_text(s, strlen(s), shown, sizeof shown), SQUASH_CATALOG_NAME_MAX);
		return false;
	}
	for (size_t i = 0; i < len; i++)
		if (!name_char(s[i])) {
			squash_errf(err, errlen, "%s '%s' holds '%s' (a %s is made of letters, digits "
				    "and . _ + -)", what, shown_text(s, len, shown, sizeof shown),
				    shown_char(s + i, len - i, bad), what);
			return false;
		}
	if (s[0] == '.') {
		squash_errf(err, errlen, "%s '%s' starts with '.'", what, s);
		return false;
	}
	return true;
}

bool squash_catalog_file_ok(const char *file, char *err, size_t errlen)
{
	char shown[SQUASH_QUOTE_BUF];
	const char *p = file;

	if (!*file || file[0] == '/') {
		squash_errf(err, errlen, "file '%s' must be a path relative to the catalog directory",
			    squash_quote(shown, sizeof shown, file, strlen(file)));
		return false;
	}
	if (strlen(file) >= SQUASH_CATALOG_LINE_MAX) {
		squash_errf(err, errlen, "file name is too long");
		return false;
	}
	for (const char *c = file; *c; c++)
		if (squash_is_control((unsigned char)*c) || *c == ' ') {
			squash_errf(err, errlen, "file '%s' holds white space or a control character",
				    squash_quote(shown, sizeof shown, file, strlen(file)));
			return false;
		}
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			squash_errf(err, errlen, "file '%s' has an empty, '.' or '..' component: it "
				    "must name a file below the catalog directory",
				    squash_quote(shown, sizeof shown, file, strlen(file)));
			return false;
		}
		p += n;
		if (*p == '/')
			p++;
		if (!*p && p[-1] == '/') {
			squash_errf(err, errlen, "file '%s' ends in '/'",
				    squash_quote(shown, sizeof shown, file, strlen(file)));
			return false;
		}
	}
	return true;
}

/* A non-digit's weight in a version (dpkg's and sort -V's order). */
static int char_order(unsigned char c)
{
	if (isdigit(c))
		return 0;
	if (isalpha(c))
		return c;
	if (c == '~')
		return -1;
	return c ? c + 256 : 0;
}

int squash_catalog_version_cmp(const char *a, const char *b)
{
	const char *sa = a, *sb = b;

	while (*a || *b) {
		int first_diff = 0;

		while ((*a && !isdigit((unsigned char)*a)) || (*b && !isdigit((unsigned char)*b))) {
			int ac = char_order((unsigned char)*a), bc = char_order((unsigned char)*b);

			if (ac != bc)
				return ac - bc;
			a++;
			b++;
		}
		while (*a == '0')
			a++;
		while (*b == '0')
			b++;
		while (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			if (!first_diff)
				first_diff = *a - *b;
			a++;
			b++;
		}
		if (isdigit((unsigned char)*a))
			return 1;
		if (isdigit((unsigned char)*b))
			return -1;
		if (first_diff)
			return first_diff;
	}
	return strcmp(sa, sb);
}

/* The next field of a line: skips blanks, returns its start and length. */
static const char *next_field(const char **p, const char *end, size_t *len)
{
	const char *s = *p, *e;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	for (e = s; e < end && *e != ' ' && *e != '\t'; e++)
		;
	*len = (size_t)(e - s);
	*p = e;
	return s;
}

static int copy_field(char *out, size_t outlen, const char *s, size_t len)
{
	if (len >= outlen)
		return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return 0;
}

/* Parses one non-comment line into e; -1 with the reason (no location). */
static int parse_line(const char *s, const char *end, struct squash_catalog_entry *e, char *err,
		      size_t errlen)
{
	char file[SQUASH_CATALOG_LINE_MAX];
	const char *f;
	size_t n;

	for (const char *c = s; c < end; c++)
		if (squash_is_control((unsigned char)*c) && *c != '\t') {
			squash_errf(err, errlen, "holds a control character (\\x%02x)", (unsigned char)*c);
			return -1;
		}
	f = next_field(&s, end, &n);
	if (copy_field(e->name, sizeof e->name, f, n)) {
		squash_errf(err, errlen, "name is too long (at most %d characters)", SQUASH_CATALOG_NAME_MAX);
		return -1;
	}
	if (!squash_catalog_name_ok(e->name, "name", err, errlen))
		return -1;
	f = next_field(&s, end, &n);
	if (n == 0) {
		squash_errf(err, errlen, "no version and file (the form is NAME VERSION FILE [DESCRIPTION])");
		return -1;
	}
	if (copy_field(e->version, sizeof e->version, f, n)) {
		squash_errf(err, errlen, "version is too long (at most %d characters)", SQUASH_CATALOG_NAME_MAX);
		return -1;
	}
	if (!squash_catalog_name_ok(e->version, "version", err, errlen))
		return -1;
	f = next_field(&s, end, &n);
	if (n == 0) {
		squash_errf(err, errlen, "no file (the form is NAME VERSION FILE [DESCRIPTION])");
		return -1;
	}
	copy_field(file, sizeof file, f, n); /* n < a line's length */
	if (!squash_catalog_file_ok(file, err, errlen))
		return -1;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	e->file = strdup(file);
	e->description = strndup(s, (size_t)(end - s));
	if (!e->file || !e->description) {
		squash_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static size_t count_lines(const char *text, size_t len)
{
	size_t n = 1;

	for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))); p++)
		n++;
	return n;
}

int squash_catalog_index_parse(const char *text, size_t len, const char *path,
			       struct squash_catalog_index *out, char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	char why[512];
	size_t cap;
	unsigned line = 0;

	memset(out, 0, sizeof(*out));
	if (len > SQUASH_CATALOG_INDEX_MAX) {
		squash_errf(err, errlen, "%s: too large (more than %u bytes)", path, SQUASH_CATALOG_INDEX_MAX);
		return -1;
	}
	if (memchr(text, '\0', len)) {
		squash_errf(err, errlen, "%s: holds a NUL byte: not a text file", path);
		return -1;
	}
	cap = count_lines(text, len);
	if (cap > SQUASH_CATALOG_ENTRIES_MAX)
		cap = SQUASH_CATALOG_ENTRIES_MAX;
	out->entries = calloc(cap, sizeof(*out->entries));
	if (!out->entries) {
		squash_errf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *s = p;
		struct squash_catalog_entry *e;

		line++;
		p = nl ? nl + 1 : end;
		if ((size_t)(eol - s) >= SQUASH_CATALOG_LINE_MAX) {
			squash_errf(err, errlen, "%s:%u: line is too long (at most %d bytes)", path, line,
				    SQUASH_CATALOG_LINE_MAX - 1);
			goto bad;
		}
		/* Blanks at both ends (and a CRLF's CR) are no part of a field. */
		while (s < eol && (*s == ' ' || *s == '\t' || *s == '\r'))
			s++;
		while (eol > s && (eol[-1] == ' ' || eol[-1] == '\t' || eol[-1] == '\r'))
			eol--;
		if (s == eol || *s == '#')
			continue;
		if (out->count == SQUASH_CATALOG_ENTRIES_MAX) {
			squash_errf(err, errlen, "%s:%u: more than %d images in one catalog", path, line,
				    SQUASH_CATALOG_ENTRIES_MAX);
			goto bad;
		}
		e = &out->entries[out->count++];
		e->line = line;
		if (parse_line(s, eol, e, why, sizeof why)) {
			squash_errf(err, errlen, "%s:%u: %s", path, line, why);
			goto bad;
		}
		for (size_t i = 0; i + 1 < out->count; i++)
			if (!strcmp(out->entries[i].name, e->name) &&
			    !strcmp(out->entries[i].version, e->version)) {
				squash_errf(err, errlen, "%s:%u: %s/%s is already on line %u", path, line,
					    e->name, e->version, out->entries[i].line);
				goto bad;
			}
	}
	return 0;
bad:
	squash_catalog_index_free(out);
	return -1;
}

int squash_catalog_index_read(const char *path, int (*fd_check)(int fd, const char *path,
								 char *err, size_t errlen),
			      struct squash_catalog_index *out, char *err, size_t errlen)
{
	struct stat st;
	char *text = NULL;
	ssize_t got;
	int fd, rc = -1;

	memset(out, 0, sizeof(*out));
	/* O_NONBLOCK: a FIFO in place of the index must not hang a submission. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		squash_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		squash_errf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		squash_errf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (fd_check && fd_check(fd, path, err, errlen))
		goto out;
	if (st.st_size > (off_t)SQUASH_CATALOG_INDEX_MAX) {
		squash_errf(err, errlen, "%s: too large (%lld bytes, at most %u)", path,
			    (long long)st.st_size, SQUASH_CATALOG_INDEX_MAX);
		goto out;
	}
	/* Publishing replaces the index by a rename, never in place: the size
	 * fstat gave is the file's. */
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		squash_errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	got = squash_read_full(fd, text, (size_t)st.st_size, 0);
	if (got < 0)
		squash_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
	else
		rc = squash_catalog_index_parse(text, (size_t)got, path, out, err, errlen);
out:
	free(text);
	close(fd);
	return rc;
}

void squash_catalog_index_free(struct squash_catalog_index *index)
{
	for (size_t i = 0; i < index->count; i++) {
		free(index->entries[i].file);
		free(index->entries[i].description);
	}
	free(index->entries);
	memset(index, 0, sizeof(*index));
}

const struct squash_catalog_entry *squash_catalog_index_find(const struct squash_catalog_index *index,
							     const char *name, const char *version)
{
	const struct squash_catalog_entry *best = NULL;

	for (size_t i = 0; i < index->count; i++) {
		const struct squash_catalog_entry *e = &index->entries[i];

		if (strcmp(e->name, name))
			continue;
		if (version ? !strcmp(e->version, version)
			    : (!best || squash_catalog_version_cmp(e->version, best->version) > 0))
			best = e;
	}
	return best;
}

char *squash_catalog_index_line(const struct squash_catalog_entry *entry)
{
	const char *d = entry->description ? entry->description : "";
	size_t len = strlen(entry->name) + strlen(entry->version) + strlen(entry->file) + strlen(d) + 5;
	char *line = malloc(len);

	if (line)
		snprintf(line, len, "%s\t%s\t%s%s%s\n", entry->name, entry->version, entry->file,
			 *d ? "\t" : "", d);
	return line;
}

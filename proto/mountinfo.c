#include "config.h"

#include "mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void squash_mountinfo_unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

/* The field at *p up to the next single space (cut there) or the end;
 * advances *p past that space, or to NULL at the end of the line. */
static char *next_field(char **p)
{
	char *f = *p, *sp;

	if (!f)
		return NULL;
	sp = strchr(f, ' ');
	if (sp) {
		*sp = '\0';
		*p = sp + 1;
	} else {
		*p = NULL;
	}
	return f;
}

/* A decimal number making up all of s (no sign, no blank), below max. */
static bool decimal(const char *s, char stop, uint64_t max, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (max - (uint64_t)(*p - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s || *p != stop)
		return false;
	*out = v;
	if (end)
		*end = p;
	return true;
}

int squash_mountinfo_parse(char *line, struct squash_mount *m)
{
	char *p = line, *f[6], *sep;
	uint64_t major, minor;
	const char *colon;

	line[strcspn(line, "\n")] = '\0';
	for (int i = 0; i < 6; i++)
		if (!(f[i] = next_field(&p)) || !*f[i])
			return -1;
	if (!decimal(f[0], '\0', UINT64_MAX, &m->id, NULL) || !decimal(f[1], '\0', UINT64_MAX, &m->parent, NULL) ||
	    !decimal(f[2], ':', UINT32_MAX, &major, &colon) || !decimal(colon + 1, '\0', UINT32_MAX, &minor, NULL))
		return -1;
	m->major = (unsigned)major;
	m->minor = (unsigned)minor;
	/* Optional fields (shared:N, master:N, ...), none of them empty, up
	 * to the lone "-". */
	m->optional = p;
	for (;;) {
		char *start = p, *opt = next_field(&p);

		if (!opt || !*opt)
			return -1;
		if (!strcmp(opt, "-")) {
			sep = start;
			break;
		}
		if (p)
			p[-1] = ' '; /* keep the optional fields one string */
	}
	/* Cut the optional fields before the separator ("" when none). */
	if (sep > m->optional) {
		sep[-1] = '\0';
	} else {
		m->optional = sep;
		*sep = '\0';
	}
	/* fstype and source are escaped by the kernel, so the super options
	 * are all the rest of the line, whatever a file system writes there. */
	m->fstype = next_field(&p);
	m->source = next_field(&p);
	m->super_options = p;
	if (!m->fstype || !*m->fstype || !m->source || !p || !*p)
		return -1;
	m->root = f[3];
	m->mount_point = f[4];
	m->mount_options = f[5];
	squash_mountinfo_unescape(m->root);
	squash_mountinfo_unescape(m->mount_point);
	squash_mountinfo_unescape(m->fstype);
	squash_mountinfo_unescape(m->source);
	return 0;
}

int squash_mountinfo_parse_copy(const char *line, char **copy, struct squash_mount *m)
{
	*copy = strndup(line, strcspn(line, "\n"));
	return *copy ? squash_mountinfo_parse(*copy, m) : -1;
}

const char *squash_mountinfo_next_line(const char *line)
{
	const char *nl = strchr(line, '\n');

	return nl && nl[1] ? nl + 1 : NULL;
}

char *squash_mountinfo_mount_point(char *line)
{
	struct squash_mount m;

	return squash_mountinfo_parse(line, &m) == 0 ? m.mount_point : NULL;
}

long squash_mount_table_parse(char *text, struct squash_mount_table *t)
{
	size_t lines = 0;

	t->text = text;
	t->count = 0;
	for (const char *c = text; *c; c++)
		lines += *c == '\n';
	t->mounts = calloc(lines + 1, sizeof(*t->mounts));
	if (!t->mounts) {
		free(text);
		t->text = NULL;
		return -1;
	}
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (squash_mountinfo_parse(line, &t->mounts[t->count]) < 0)
			return (long)t->count + 1;
		t->count++;
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* The whole file, or NULL with errno (EFBIG past SQUASH_MOUNTINFO_MAX). */
static char *read_whole(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0, cap = 64 << 10;
	char *buf = fd >= 0 ? malloc(cap + 1) : NULL;
	ssize_t k;

	if (!buf)
		goto fail;
	while ((k = read(fd, buf + got, cap - got)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		got += (size_t)k;
		if (got == cap) {
			char *grown;
			if (cap >= SQUASH_MOUNTINFO_MAX) {
				errno = EFBIG;
				goto fail;
			}
			cap *= 2;
			if (!(grown = realloc(buf, cap + 1)))
				goto fail;
			buf = grown;
		}
	}
	close(fd);
	buf[got] = '\0';
	return buf;
fail:;
	int e = errno;
	free(buf);
	if (fd >= 0)
		close(fd);
	errno = e;
	return NULL;
}

int squash_mount_table_read(const char *path, struct squash_mount_table *t, char *why, size_t whylen)
{
	char *text = read_whole(path);
	long bad;

	t->text = NULL;
	t->mounts = NULL;
	t->count = 0;
	if (!text) {
		snprintf(why, whylen, "cannot read %s: %s", path,
			 errno == EFBIG ? "larger than 64 MiB" : strerror(errno));
		return -1;
	}
	bad = squash_mount_table_parse(text, t);
	if (bad < 0)
		snprintf(why, whylen, "cannot read %s: out of memory", path);
	else if (bad > 0)
		snprintf(why, whylen, "line %ld of %s does not parse", bad, path);
	if (bad) {
		squash_mount_table_free(t);
		return -1;
	}
	return 0;
}

void squash_mount_table_free(struct squash_mount_table *t)
{
	free(t->mounts);
	free(t->text);
	t->mounts = NULL;
	t->text = NULL;
	t->count = 0;
}

const struct squash_mount *squash_mount_table_by_id(const struct squash_mount_table *t, uint64_t id)
{
	for (size_t i = 0; i < t->count; i++)
		if (t->mounts[i].id == id)
			return &t->mounts[i];
	return NULL;
}

bool squash_mount_point_covers(const char *mp, const char *path)
{
	size_t n = strlen(mp);

	if (mp[0] != '/' || path[0] != '/')
		return false;
	if (n == 1)
		return true;
	return !strncmp(mp, path, n) && (path[n] == '/' || path[n] == '\0');
}

size_t squash_mount_table_longest_prefix(const struct squash_mount_table *t, const char *path)
{
	size_t best = 0;

	for (size_t i = 0; i < t->count; i++) {
		size_t n = strlen(t->mounts[i].mount_point);
		if (n > best && squash_mount_point_covers(t->mounts[i].mount_point, path))
			best = n;
	}
	return best;
}

const char *squash_mount_option(const char *options, const char *name, size_t *len, int *count)
{
	size_t nlen = strlen(name);
	const char *found = NULL;
	int n = 0;

	for (const char *p = options; *p;) {
		size_t item = strcspn(p, ",");

		if (item > nlen && !strncmp(p, name, nlen) && p[nlen] == '=') {
			if (!found) {
				found = p + nlen + 1;
				*len = item - nlen - 1;
			}
			n++;
		}
		p += item;
		if (*p)
			p++;
	}
	if (count)
		*count = n;
	return found;
}

bool squash_mount_option_flag(const char *options, const char *word)
{
	size_t w = strlen(word);

	for (const char *p = options; *p;) {
		size_t item = strcspn(p, ",");

		if (item == w && !strncmp(p, word, w))
			return true;
		p += item;
		if (*p)
			p++;
	}
	return false;
}

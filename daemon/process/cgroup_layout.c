/* Reading the host's cgroup layout from mountinfo and /proc/self/cgroup
 * text (cgroup_layout.h). */
#include "config.h"

#include "process/cgroup_layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

/* The next line of text in [*p, NUL): its start and length; advances *p. */
static bool next_line(const char **p, const char **line, size_t *len)
{
	if (!**p)
		return false;
	*line = *p;
	*len = strcspn(*p, "\n");
	*p += (*p)[*len] ? *len + 1 : *len;
	return true;
}

static bool copy_field(const char *start, size_t n, char *out, size_t len)
{
	if (n >= len)
		return false;
	memcpy(out, start, n);
	out[n] = '\0';
	return true;
}

/* Whether the comma-separated list holds word as a whole item. */
static bool list_has(const char *list, size_t n, const char *word)
{
	size_t w = strlen(word);

	for (const char *p = list, *end = list + n; p < end;) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t item = comma ? (size_t)(comma - p) : (size_t)(end - p);

		if (item == w && !memcmp(p, word, w))
			return true;
		p += item + 1;
	}
	return false;
}

enum cgroup_layout cgroup_layout_from_mountinfo(const char *mountinfo)
{
	const char *p = mountinfo, *line;
	size_t len;
	bool v1 = false, v2_root = false, v2_elsewhere = false;
	struct squash_mount m;
	char *copy;

	while (next_line(&p, &line, &len)) {
		if (squash_mountinfo_parse_copy(line, &copy, &m) == 0) {
			if (!strcmp(m.fstype, "cgroup2")) {
				if (!strcmp(m.mount_point, CGROUP_ROOT))
					v2_root = true;
				else
					v2_elsewhere = true;
			} else if (!strcmp(m.fstype, "cgroup")) {
				v1 = true;
			}
		}
		free(copy);
	}
	if (v2_root)
		return CGROUP_LAYOUT_V2;
	if (v1)
		return v2_elsewhere ? CGROUP_LAYOUT_HYBRID : CGROUP_LAYOUT_V1;
	return v2_elsewhere ? CGROUP_LAYOUT_V2 : CGROUP_LAYOUT_NONE;
}

int cgroup_v1_mount_point(const char *mountinfo, const char *controller, char *out, size_t len)
{
	const char *p = mountinfo, *line;
	size_t n;
	struct squash_mount m;
	char *copy;
	int rc = -1;

	while (next_line(&p, &line, &n)) {
		bool match = squash_mountinfo_parse_copy(line, &copy, &m) == 0 && !strcmp(m.fstype, "cgroup") &&
			     squash_mount_option_flag(m.super_options, controller);

		if (match)
			rc = (size_t)snprintf(out, len, "%s", m.mount_point) < len ? 0 : -1;
		free(copy);
		if (match)
			return rc;
	}
	return -1;
}

int cgroup_own_path(const char *proc_cgroup, const char *controller, char *out, size_t len)
{
	const char *p = proc_cgroup, *line;
	size_t n;

	while (next_line(&p, &line, &n)) {
		/* "ID:CONTROLLERS:PATH"; the path may itself hold colons. */
		const char *end = line + n, *first = memchr(line, ':', n), *second;

		if (!first || !(second = memchr(first + 1, ':', (size_t)(end - first - 1))))
			continue;
		const char *list = first + 1, *path = second + 1;
		size_t list_len = (size_t)(second - list);
		bool match = controller ? list_has(list, list_len, controller)
					: (list_len == 0 && first - line == 1 && line[0] == '0');
		if (match)
			return copy_field(path, (size_t)(end - path), out, len) ? 0 : -1;
	}
	return -1;
}

#include "config.h"

#include "mount_layers.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stacking types whose layers mountinfo does not show (aufs keeps its
 * branches in sysfs) or that no one here has looked at: refused. */
static const char *const opaque_stacks[] = { "aufs", "unionfs", "wrapfs", "sdcardfs", NULL };

/* Stacking types whose source is the one directory below. */
static const char *const source_stacks[] = { "ecryptfs", "shiftfs", NULL };

static bool listed(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

/* Removes overlayfs' backslash escapes in place: "\x" is x. */
static void ovl_unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (*s == '\\' && s[1])
			s++;
		*d++ = *s;
	}
	*d = '\0';
}

/* lowerdir=: layers split at ':' not escaped by a backslash; "::" only
 * marks where the data-only layers begin. */
static int each_lower(char *list, squash_layer_fn fn, void *arg)
{
	char *start = list, *d = list;

	for (char *s = list;; s++) {
		if (*s == '\\' && s[1]) {
			*d++ = *s++;
			*d++ = *s;
			continue;
		}
		if (*s != ':' && *s != '\0') {
			*d++ = *s;
			continue;
		}
		bool end = *s == '\0';
		*d = '\0';
		if (*start) {
			int rc;
			ovl_unescape(start);
			if ((rc = fn(start, arg)) != 0)
				return rc;
		}
		if (end)
			return 0;
		start = d = s + 1;
	}
}

/* Whether an overlay option may name a directory overlayfs reads
 * through: any with "dir" in its name but redirect_dir (a mode). */
static bool layer_like(const char *name, size_t n)
{
	if (n == 12 && !memcmp(name, "redirect_dir", 12))
		return false;
	for (size_t i = 0; i + 3 <= n; i++)
		if (!memcmp(name + i, "dir", 3))
			return true;
	return false;
}

static int overlay_layers(const struct squash_mount *m, squash_layer_fn fn, void *arg, char *why, size_t whylen)
{
	int lowers = 0, rc = 0;

	for (const char *p = m->super_options; *p && !rc;) {
		size_t item = strcspn(p, ","), name = strcspn(p, "=,");
		const char *next = p[item] ? p + item + 1 : p + item;

		if (name == item || !layer_like(p, name)) {
			p = next;
			continue;
		}
		char *value = strndup(p + name + 1, item - name - 1);
		if (!value) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		/* seq_show_option's \ooo first, then overlayfs' own escapes. */
		squash_mountinfo_unescape(value);
		if (name == 8 && !memcmp(p, "lowerdir", 8)) {
			lowers++;
			rc = each_lower(value, fn, arg);
		} else if ((name == 9 && !memcmp(p, "lowerdir+", 9)) || (name == 8 && !memcmp(p, "datadir+", 8))) {
			/* Taken literally by overlayfs (no escapes). */
			lowers++;
			rc = fn(value, arg);
		} else if ((name == 8 && !memcmp(p, "upperdir", 8)) || (name == 7 && !memcmp(p, "workdir", 7))) {
			ovl_unescape(value);
			rc = fn(value, arg);
		} else {
			snprintf(why, whylen, "the overlay at %s has an option %.*s= not understood", m->mount_point,
				 (int)name, p);
			rc = -1;
		}
		free(value);
		p = next;
	}
	if (!rc && !lowers) {
		snprintf(why, whylen, "the overlay at %s shows no lower layer", m->mount_point);
		return -1;
	}
	return rc;
}

int squash_mount_layers(const struct squash_mount *m, squash_layer_fn fn, void *arg, char *why, size_t whylen)
{
	if (!strcmp(m->fstype, "overlay"))
		return overlay_layers(m, fn, arg, why, whylen);
	if (listed(source_stacks, m->fstype))
		return fn(m->source, arg);
	if (listed(opaque_stacks, m->fstype)) {
		snprintf(why, whylen, "%s at %s stacks on directories mountinfo does not show", m->fstype,
			 m->mount_point);
		return -1;
	}
	return 0;
}

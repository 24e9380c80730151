/* The learned start profiles' path template (profile_cache_path.h). */
#include "config.h"

#include "profile_cache_path.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int put(char *out, size_t outlen, size_t *at, const char *s, size_t n)
{
	if (n >= outlen - *at)
		return -ENAMETOOLONG;
	memcpy(out + *at, s, n);
	*at += n;
	out[*at] = '\0';
	return 0;
}

int profile_cache_expand(const char *tmpl, const struct profile_cache_user *u, char *out,
			 size_t outlen)
{
	size_t at = 0;
	int r = 0;

	if (!outlen)
		return -ENAMETOOLONG;
	out[0] = '\0';
	if (!*tmpl || strlen(tmpl) > PROFILE_CACHE_TEMPLATE_MAX)
		return -EINVAL;
	for (const char *p = tmpl; *p && r == 0; p++) {
		char uid[24];

		if (*p != '%') {
			r = put(out, outlen, &at, p, 1);
			continue;
		}
		switch (*++p) {
		case 'h':
		case 'u': {
			const char *s = *p == 'h' ? u->home : u->name;

			if (!s || !*s)
				return -EINVAL;
			r = put(out, outlen, &at, s, strlen(s));
			break;
		}
		case 'U':
			snprintf(uid, sizeof(uid), "%lu", u->uid);
			r = put(out, outlen, &at, uid, strlen(uid));
			break;
		case '%':
			r = put(out, outlen, &at, "%", 1);
			break;
		default: /* the end of the template included */
			return -EINVAL;
		}
	}
	if (r == 0 && out[0] != '/')
		r = -EINVAL;
	return r;
}

bool profile_cache_needs_passwd(const char *tmpl)
{
	for (const char *p = strchr(tmpl, '%'); p && p[1]; p = strchr(p + 2, '%'))
		if (p[1] == 'h' || p[1] == 'u')
			return true;
	return false;
}

int profile_cache_template_check(const char *tmpl)
{
	static const struct profile_cache_user someone = { "/home/someone", "someone", 1000 };
	char path[PROFILE_CACHE_TEMPLATE_MAX * 8];

	return profile_cache_expand(tmpl, &someone, path, sizeof(path)) == 0 ? 0 : -EINVAL;
}

/* The path template of the learned start profiles (squashd.conf
 * start_profile_cache, squash-reader --profile-cache): squashd checks it
 * when it reads its settings, the reader expands it as the user
 * (docs/architecture.md, "Learned start profiles"). Here once, so that both
 * agree on what is valid. */
#ifndef SQUASH_PROFILE_CACHE_PATH_H
#define SQUASH_PROFILE_CACHE_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes of a template at most: it travels in the reader's argv, which
 * squashd's spawner bounds (process/server_spawn.c). */
#define PROFILE_CACHE_TEMPLATE_MAX 512

struct profile_cache_user {
	const char *home; /* %h */
	const char *name; /* %u */
	unsigned long uid; /* %U */
};

/* Expands tmpl for u into out: %h the home, %u the user name, %U the
 * numeric uid, %% a percent. 0; -EINVAL for any other %, a template
 * empty or over PROFILE_CACHE_TEMPLATE_MAX, a %h or %u that u lacks, or a
 * path that is not absolute once expanded; -ENAMETOOLONG when out is too
 * small. */
int profile_cache_expand(const char *tmpl, const struct profile_cache_user *u, char *out,
			 size_t outlen);

/* Whether tmpl names %h or %u (the reader then looks its user up). */
bool profile_cache_needs_passwd(const char *tmpl);

/* squashd's check of a setting: 0 or -EINVAL (as profile_cache_expand,
 * for a user with an absolute home). */
int profile_cache_template_check(const char *tmpl);

#endif

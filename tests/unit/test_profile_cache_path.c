/* The learned start profiles' path template (proto/profile_cache_path.h):
 * %h, %u, %U and %% expand, anything else after a % is refused, as are an
 * empty or overlong template, a user without the home or name it names,
 * a relative result and one that does not fit. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "profile_cache_path.h"
#include "unit.h"

static const struct profile_cache_user alice = { "/home/alice", "alice", 1234 };
static char out[256];

static const char *expand(const char *tmpl, const struct profile_cache_user *u)
{
	return profile_cache_expand(tmpl, u, out, sizeof(out)) == 0 ? out : "(refused)";
}

int main(void)
{
	static const struct profile_cache_user nobody_known = { NULL, NULL, 7 };
	char tiny[8], big[PROFILE_CACHE_TEMPLATE_MAX + 2];

	CHECK_STR(expand("%h/.cache/slurm-squash/start-profiles", &alice),
		  "/home/alice/.cache/slurm-squash/start-profiles");
	CHECK_STR(expand("/scratch/%u/%U/p", &alice), "/scratch/alice/1234/p");
	CHECK_STR(expand("/x/100%%/%U%%", &alice), "/x/100%/1234%");
	CHECK_STR(expand("/plain", &alice), "/plain");
	/* Anything else after a %, the template's end included. */
	CHECK_STR(expand("/x/%j", &alice), "(refused)");
	CHECK_STR(expand("/x/%", &alice), "(refused)");
	CHECK_STR(expand("/x/%H", &alice), "(refused)");
	/* Relative once expanded; empty. */
	CHECK_STR(expand("%u/p", &alice), "(refused)");
	CHECK_STR(expand("cache", &alice), "(refused)");
	CHECK_STR(expand("", &alice), "(refused)");
	/* A user whose home or name is unknown: %U only. */
	CHECK_STR(expand("%h/p", &nobody_known), "(refused)");
	CHECK_STR(expand("/p/%u", &nobody_known), "(refused)");
	CHECK_STR(expand("/p/%U", &nobody_known), "/p/7");
	/* Too long for out, or for squashd's argv. */
	CHECK_INT(profile_cache_expand("%h/.cache", &alice, tiny, sizeof(tiny)), -ENAMETOOLONG);
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(profile_cache_template_check(big), -EINVAL);
	big[PROFILE_CACHE_TEMPLATE_MAX] = '\0';
	CHECK_INT(profile_cache_template_check(big), 0);
	/* Who needs the user looked up. */
	CHECK(profile_cache_needs_passwd("%h/x"));
	CHECK(profile_cache_needs_passwd("/x/%u"));
	CHECK(!profile_cache_needs_passwd("/x/%U/%%u"));
	CHECK(!profile_cache_needs_passwd("/x/%%h"));
	/* squashd's check: the documented example, and what it refuses. */
	CHECK_INT(profile_cache_template_check("%h/.cache/slurm-squash/start-profiles"), 0);
	CHECK_INT(profile_cache_template_check("/x/%q"), -EINVAL);
	return unit_exit_code();
}

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "imagespec.h"
#include "quote.h"
#include "target.h"

#define QUOTE_MAX SQUASH_QUOTE_MAX

/* Top-level directories a job must never cover: the system the job and
 * slurmstepd run on, and the kernel's interfaces. */
static const char *const system_dirs[] = {
	"etc", "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
	"var", "run", "proc", "sys", "dev", "boot", "root", "srv",
};

bool squash_is_system_path(const char *path)
{
	const char *first = path;
	size_t len;
	size_t i;

	if (*path != '/')
		return false;
	/* Compare the first component, so "//etc" and "/etc/x" count too and
	 * "/etcetera" does not. */
	while (*first == '/')
		first++;
	len = strcspn(first, "/");
	if (len == 0)
		return true; /* "/" itself */
	if ((len == 1 && first[0] == '.') ||
	    (len == 2 && first[0] == '.' && first[1] == '.'))
		return true; /* "/./etc": not normalised, assume the worst */
	for (i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++)
		if (strlen(system_dirs[i]) == len &&
		    memcmp(first, system_dirs[i], len) == 0)
			return true;
	return false;
}

/* Syntax shared by targets, prefixes and image directories. `what` names
 * the kind of path in the message; a target (or prefix of targets) is
 * listed in SQUASH_MOUNTS and must not cover a system directory. */
static int check_clean_path(const char *path, const char *what, bool target, char *err,
			    size_t errlen)
{
	size_t len = strnlen(path, SQUASH_PATH_MAX);
	const char *p;

	if (len == 0) {
		squash_errf(err, errlen, "empty %s", what);
		return -1;
	}
	if (squash_has_control_char(path)) {
		char shown[SQUASH_QUOTE_BUF];

		squash_errf(err, errlen, "%s '%s' contains a control character", what,
			    squash_quote(shown, sizeof shown, path, len));
		return -1;
	}
	if (len >= SQUASH_PATH_MAX) {
		squash_errf(err, errlen, "%s is too long (at most %d bytes)",
			    what, SQUASH_PATH_MAX - 1);
		return -1;
	}
	if (path[0] != '/') {
		squash_errf(err, errlen, "%s '%.*s' is not an absolute path",
			    what, QUOTE_MAX, path);
		return -1;
	}
	if (target && strpbrk(path, ",:")) {
		/* Tasks get the targets as one ':'-separated list (SQUASH_MOUNTS). */
		squash_errf(err, errlen,
			    "%s '%.*s' contains '%c'; mount points may not contain ',' or ':' (they are listed in SQUASH_MOUNTS separated by ':'), choose another TARGET",
			    what, QUOTE_MAX, path, *strpbrk(path, ",:"));
		return -1;
	}
	if (len > 1 && path[len - 1] == '/') {
		squash_errf(err, errlen, "%s '%.*s' ends with '/'", what,
			    QUOTE_MAX, path);
		return -1;
	}
	for (p = path; *p == '/';) {
		const char *comp = p + 1;
		size_t n = strcspn(comp, "/");

		if (len > 1 && (n == 0 || (n == 1 && comp[0] == '.') ||
				(n == 2 && comp[0] == '.' && comp[1] == '.'))) {
			squash_errf(err, errlen,
				    "%s '%.*s' is not normalised (empty, '.' or '..' component)",
				    what, QUOTE_MAX, path);
			return -1;
		}
		p = comp + n;
	}
	if (target && squash_is_system_path(path)) {
		squash_errf(err, errlen, "%s '%.*s' is a system directory", what,
			    QUOTE_MAX, path);
		return -1;
	}
	if (!target && len == 1) {
		squash_errf(err, errlen, "%s '/' is every directory: name those of admin-built images", what);
		return -1;
	}
	return 0;
}

enum list_kind { TARGET_PREFIXES, ALLOWED_TARGETS, IMAGE_DIRECTORIES };

static int parse_list(const char *text, enum list_kind kind, struct squash_prefixes *out,
		      char *err, size_t errlen)
{
	const char *p = text;
	bool allow_exact = kind == ALLOWED_TARGETS, target = kind != IMAGE_DIRECTORIES;
	const char *what = target ? "target prefix" : "image directory";

	memset(out, 0, sizeof(*out));
	if (!text || !*text) {
		squash_errf(err, errlen, "no %s given", what);
		return -1;
	}
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);
		bool exact = allow_exact && len > 0 && *p == '=';
		char *item;

		if (out->count == SQUASH_MAX_PREFIXES) {
			squash_errf(err, errlen, "too many %s (at most %d)",
				    target ? "target prefixes" : "image directories", SQUASH_MAX_PREFIXES);
			goto fail;
		}
		if (len >= SQUASH_PATH_MAX) {
			squash_errf(err, errlen,
				    "%s %zu is too long (at most %d bytes)",
				    what, out->count + 1, SQUASH_PATH_MAX - 1);
			goto fail;
		}
		item = strndup(p + exact, len - exact);
		if (!item) {
			squash_errf(err, errlen, "out of memory");
			goto fail;
		}
		out->exact[out->count] = exact;
		out->items[out->count++] = item;
		if (check_clean_path(item, exact ? "exact target" : what, target, err, errlen) < 0)
			goto fail;
		if (!colon)
			break;
		p = colon + 1;
	}
	return 0;
fail:
	squash_prefixes_free(out);
	return -1;
}

int squash_prefixes_parse(const char *text, struct squash_prefixes *out,
			  char *err, size_t errlen)
{
	return parse_list(text, TARGET_PREFIXES, out, err, errlen);
}

int squash_image_dirs_parse(const char *text, struct squash_prefixes *out, char *err, size_t errlen)
{
	return parse_list(text, IMAGE_DIRECTORIES, out, err, errlen);
}

int squash_allowed_targets_parse(const char *text, struct squash_prefixes *out, char *err,
				 size_t errlen)
{
	return parse_list(text, ALLOWED_TARGETS, out, err, errlen);
}

void squash_prefixes_free(struct squash_prefixes *p)
{
	size_t i;

	for (i = 0; i < p->count && i < SQUASH_MAX_PREFIXES; i++)
		free(p->items[i]);
	memset(p, 0, sizeof(*p));
}

/* Component-boundary prefix test: /squash/x is below /squash, /squashX and
 * /squash itself are not. */
static bool strictly_below(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(path, prefix, n) == 0 && path[n] == '/' &&
	       path[n + 1] != '\0';
}

bool squash_prefixes_contain(const struct squash_prefixes *p, const char *path)
{
	for (size_t i = 0; p && i < p->count; i++)
		if (!p->exact[i] && strictly_below(path, p->items[i]))
			return true;
	return false;
}

void squash_prefixes_format(const struct squash_prefixes *p, char *buf, size_t buflen)
{
	size_t used = 0;

	if (buflen)
		buf[0] = '\0';
	for (size_t i = 0; i < p->count && used < buflen; i++) {
		int n = snprintf(buf + used, buflen - used, "%s%s%s", i > 0 ? ":" : "",
				 p->exact[i] ? "=" : "", p->items[i]);

		if (n < 0)
			break;
		used += (size_t)n;
	}
}

int squash_target_check(const char *target, const struct squash_prefixes *allowed,
			char *err, size_t errlen)
{
	char names[512];
	size_t i;

	if (!target) {
		squash_errf(err, errlen, "empty target");
		return -1;
	}
	if (check_clean_path(target, "target", true, err, errlen) < 0)
		return -1;
	if (!allowed || allowed->count == 0) {
		squash_errf(err, errlen, "no target prefixes are allowed on this node");
		return -1;
	}
	for (i = 0; i < allowed->count; i++) {
		if (allowed->exact[i]) {
			if (strcmp(target, allowed->items[i]) == 0)
				return 0;
			continue;
		}
		if (strictly_below(target, allowed->items[i]))
			return 0;
		if (strcmp(target, allowed->items[i]) == 0) {
			squash_errf(err, errlen,
				    "target '%.*s' is the prefix itself; mount below it, e.g. %.*s/NAME",
				    QUOTE_MAX, target, QUOTE_MAX, target);
			return -1;
		}
	}
	squash_prefixes_format(allowed, names, sizeof(names));
	squash_errf(err, errlen, "target '%.*s' is not below an allowed prefix (%s)",
		    QUOTE_MAX, target, names);
	return -1;
}

bool squash_targets_overlap(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	const char *shorter = la <= lb ? a : b;
	const char *longer = la <= lb ? b : a;
	size_t n = la <= lb ? la : lb;

	if (strncmp(shorter, longer, n) != 0)
		return false;
	/* Equal, or the longer continues with a new component ("/" alone
	 * contains everything). */
	return longer[n] == '\0' || longer[n] == '/' || (n > 0 && shorter[n - 1] == '/');
}

int squash_target_pair_check(const char *image_a, const char *target_a,
			     const char *image_b, const char *target_b,
			     char *err, size_t errlen)
{
	if (!target_a || !target_b || !squash_targets_overlap(target_a, target_b))
		return 0;
	if (strcmp(target_a, target_b) == 0)
		return 0; /* a merge group: one read-only tree, the later image on top */
	{
		bool a_outer = strlen(target_a) < strlen(target_b);
		const char *outer = a_outer ? target_a : target_b;
		const char *outer_image = a_outer ? image_a : image_b;
		const char *inner = a_outer ? target_b : target_a;
		const char *inner_image = a_outer ? image_b : image_a;

		squash_errf(err, errlen,
			    "target %.*s of %.*s lies inside target %.*s of %.*s; nested targets are not supported (one mount would hide the other or could not be made), give %.*s a target outside %.*s (IMAGE:TARGET)",
			    QUOTE_MAX, inner, QUOTE_MAX, inner_image, QUOTE_MAX, outer,
			    QUOTE_MAX, outer_image, QUOTE_MAX, inner_image, QUOTE_MAX, outer);
	}
	return -1;
}

int squash_target_merge_check(const char *image_a, const char *target_a, bool writable_a,
			      const char *image_b, const char *target_b, bool writable_b,
			      char *err, size_t errlen)
{
	if (squash_target_pair_check(image_a, target_a, image_b, target_b, err, errlen) < 0)
		return -1;
	if (!target_a || !target_b || strcmp(target_a, target_b) != 0 || (!writable_a && !writable_b))
		return 0;
	squash_errf(err, errlen,
		    "%.*s and %.*s are merged at %.*s (the same target), and merged images are read-only: "
		    ":rw is not supported on a merge group; drop :rw, or give %.*s a target of its own",
		    QUOTE_MAX, image_a, QUOTE_MAX, image_b, QUOTE_MAX, target_a,
		    QUOTE_MAX, writable_a ? image_a : image_b);
	return -1;
}

int squash_step_target_clash(const char *job_image, const char *job_target,
			     const char *step_image, const char *step_target,
			     char *err, size_t errlen)
{
	if (!strcmp(job_target, step_target) && !strcmp(job_image, step_image))
		return 1;
	if (!squash_targets_overlap(job_target, step_target))
		return 0;
	squash_errf(err, errlen, "its target %s %s the target %s of the job's image %s; "
		    "a step sees the job's images and its own, so give the step image "
		    "another target (IMAGE:TARGET)", step_target,
		    !strcmp(job_target, step_target) ? "is also" :
		    strlen(job_target) < strlen(step_target) ? "lies inside" : "contains",
		    job_target, job_image);
	return -1;
}

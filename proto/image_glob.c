#include "config.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "errmsg.h"
#include "image_glob.h"
#include "quote.h"

bool squash_image_is_glob(const char *image)
{
	/* "@NAME": a catalog name, never a glob (catalog.h). */
	return image && !squash_catalog_is_ref(image) && strpbrk(image, "*?[") != NULL;
}

static void free_item(struct squash_image_spec *it)
{
	free(it->image);
	free(it->target);
	free(it->upper);
	memset(it, 0, sizeof(*it));
}

/* One match as an item like proto (image = path, '%' doubled when asked). */
static int add_match(struct squash_image_list *out, const struct squash_image_spec *proto,
		     const char *path, bool escape)
{
	struct squash_image_spec *it = &out->items[out->count];

	it->image = escape ? squash_pattern_escape(path) : strdup(path);
	it->target = proto->target ? strdup(proto->target) : NULL;
	it->upper = proto->upper ? strdup(proto->upper) : NULL;
	it->writable = proto->writable;
	out->count++;
	return !it->image || (proto->target && !it->target) || (proto->upper && !it->upper) ? -1 : 0;
}

/* The pattern of item, %u and %% expanded (malloc'd), or NULL with err. */
static char *pattern_of(const char *image, const struct squash_pattern_values *v, char *err,
			size_t errlen)
{
	char buf[SQUASH_PATH_MAX], why[512];

	if (!v || !strchr(image, '%'))
		return strdup(image);
	if (squash_pattern_needs_job(image)) {
		squash_errf(err, errlen, "%.*s: a glob cannot hold %%a, %%A or %%j: it is expanded at "
			    "submission, before there is a job; name the images of each task plainly",
			    SQUASH_QUOTE_MAX, image);
		return NULL;
	}
	if (squash_pattern_expand(image, v, buf, sizeof(buf), why, sizeof(why))) {
		squash_errf(err, errlen, "%.*s: %s", SQUASH_QUOTE_MAX, image, why);
		return NULL;
	}
	return strdup(buf);
}

int squash_image_globs_expand(struct squash_image_list *list,
			      const struct squash_pattern_values *v, char *err, size_t errlen)
{
	struct squash_image_list *out = NULL;
	size_t i;
	int rc = -1;

	for (i = 0; i < list->count && !squash_image_is_glob(list->items[i].image); i++)
		;
	if (i == list->count)
		return 0;
	out = calloc(1, sizeof(*out));
	if (!out) {
		squash_errf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < list->count; i++) {
		const struct squash_image_spec *it = &list->items[i];
		char *pattern = NULL;
		struct stat st;
		glob_t g;

		if (!squash_image_is_glob(it->image) ||
		    (!strchr(it->image, '%') && lstat(it->image, &st) == 0)) {
			if (out->count == SQUASH_MAX_IMAGES)
				goto too_many;
			out->items[out->count++] = *it; /* moved */
			list->items[i] = (struct squash_image_spec){ 0 };
			continue;
		}
		if (!(pattern = pattern_of(it->image, v, err, errlen)))
			goto out;
		memset(&g, 0, sizeof(g));
		bool failed = true;
		int grc = glob(pattern, GLOB_NOESCAPE | GLOB_ERR, NULL, &g);
		if (grc == GLOB_NOMATCH || (grc == 0 && g.gl_pathc == 0)) {
			squash_errf(err, errlen, "%.*s: no file matches (0 images)", SQUASH_QUOTE_MAX,
				    it->image);
		} else if (grc != 0) {
			squash_errf(err, errlen, "%.*s: cannot expand: %s", SQUASH_QUOTE_MAX, it->image,
				    grc == GLOB_NOSPACE ? "out of memory" : strerror(errno ? errno : EIO));
		} else if (out->count + g.gl_pathc > SQUASH_MAX_IMAGES) {
			squash_errf(err, errlen, "%.*s matches %zu files; with the other images that is "
				    "%zu, more than the %d a job may have", SQUASH_QUOTE_MAX, it->image,
				    (size_t)g.gl_pathc, out->count + g.gl_pathc + (list->count - i - 1),
				    SQUASH_MAX_IMAGES);
		} else {
			grc = 0;
			for (size_t k = 0; k < g.gl_pathc && grc == 0; k++)
				grc = add_match(out, it, g.gl_pathv[k], v != NULL);
			if (grc)
				squash_errf(err, errlen, "out of memory");
			failed = grc != 0;
		}
		globfree(&g);
		free(pattern);
		if (failed)
			goto out;
	}
	for (i = 0; i < list->count; i++)
		free_item(&list->items[i]);
	*list = *out;
	out->count = 0;
	rc = 0;
	goto out;
too_many:
	squash_errf(err, errlen, "the globs give more than %d images, the most a job may have",
		    SQUASH_MAX_IMAGES);
out:
	for (i = 0; out && i < out->count; i++)
		free_item(&out->items[i]);
	free(out);
	return rc;
}

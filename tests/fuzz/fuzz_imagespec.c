/* libFuzzer harness: the --squash-image syntax. Parses the input, formats
 * the result and parses that again (it must give the same list), derives
 * default targets and runs the target check on every target. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "imagespec.h"
#include "path_pattern.h"
#include "target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_string(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static void check_round_trip(const struct squash_image_list *list)
{
	struct squash_image_list again;
	char *text = squash_imagespec_format(list);
	size_t i;

	if (!text)
		abort();
	if (squash_imagespec_parse(text, &again, NULL, 0) != 0 ||
	    again.count != list->count)
		abort();
	for (i = 0; i < list->count; i++)
		if (!same_string(list->items[i].image, again.items[i].image) ||
		    !same_string(list->items[i].target, again.items[i].target))
			abort();
	squash_imagespec_free(&again);
	free(text);
}

/* Patterns: expansion of a path whose syntax passed never fails on
 * syntax, stays within its buffer, and %-escaped text expands back. */
static void check_pattern(const char *path)
{
	static const struct squash_pattern_values v = {
		.have_job = true, .is_array = true, .job_id = 4294967295u,
		.array_job_id = 7, .array_task_id = 4294967294u, .user = "u",
	};
	char out[SQUASH_PATH_MAX], err[512];
	char *escaped = squash_pattern_escape(path);

	if (!escaped)
		abort();
	if (squash_pattern_expand(escaped, &v, out, sizeof(out), err, sizeof(err)) != 0 ||
	    strcmp(out, path) != 0)
		abort();
	free(escaped);
	if (squash_pattern_check(path, err, sizeof(err)) == 0 &&
	    squash_pattern_expand(path, &v, out, sizeof(out), err, sizeof(err)) == 0 &&
	    strlen(out) >= sizeof(out))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct squash_prefixes prefixes;
	struct squash_image_list list;
	char *text = malloc(size + 1);
	char err[256];
	size_t i;

	if (!text)
		return 0;
	if (prefixes.count == 0 &&
	    squash_prefixes_parse("/squash:/scratch/images", &prefixes, NULL, 0) != 0)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	if (squash_imagespec_parse(text, &list, err, sizeof(err)) == 0) {
		if (list.count == 0 || list.count > SQUASH_MAX_IMAGES)
			abort();
		check_round_trip(&list);
		for (i = 0; i < list.count; i++) {
			char target[SQUASH_PATH_MAX];
			const char *t = list.items[i].target;

			if (!t && squash_default_target(list.items[i].image, "/squash",
							target, sizeof(target), err,
							sizeof(err)) == 0) {
				if (strlen(target) >= SQUASH_PATH_MAX)
					abort();
				t = target;
			}
			if (t)
				(void)squash_target_check(t, &prefixes, err, sizeof(err));
			check_pattern(list.items[i].image);
		}
		squash_imagespec_free(&list);
	} else if (list.count != 0) {
		abort(); /* a failed parse leaves nothing to free */
	}
	/* The same text as a prefix list exercises the prefix parser. */
	{
		struct squash_prefixes p;

		if (squash_prefixes_parse(text, &p, err, sizeof(err)) == 0)
			squash_prefixes_free(&p);
	}
	free(text);
	return 0;
}

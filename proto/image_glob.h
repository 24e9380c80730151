/* Globs in image paths (--squash-image='/lustre/hcp/bundle_*.sqfs:/data'),
 * expanded where the user runs: at submission (the plugin, as the user)
 * and in squash-shell. Shared so that both give the same list and the
 * same words. */
#ifndef SQUASH_IMAGE_GLOB_H
#define SQUASH_IMAGE_GLOB_H

#include <stdbool.h>
#include <stddef.h>

#include "imagespec.h"
#include "path_pattern.h"

/* Whether an image path is a glob: it holds '*', '?' or '[' (and is not a
 * catalog name, "@NAME"). */
bool squash_image_is_glob(const char *image);

/* Replaces, in place, every item of list whose image is a glob by one item
 * per file it matches (glob(3), sorted, backslashes literal), each with
 * the item's target and flags; a path that names an existing file as it
 * is stays as it is (so "run[1].sqfs" keeps working). %u and %% in a glob
 * are expanded first with v (v NULL: '%' is literal); %a, %A and %j
 * cannot be (there is no job yet), and are refused. The matches are
 * written with '%' doubled when v is given, so the caller's own pattern
 * expansion gives them back as they are. Returns 0, or -1 with err: a
 * glob that matches nothing, or a list that grows beyond
 * SQUASH_MAX_IMAGES (both with the count). */
int squash_image_globs_expand(struct squash_image_list *list,
			      const struct squash_pattern_values *v, char *err, size_t errlen);

#endif

/* The images' environments applied to a process's environment: the rules
 * a job's tasks (spank/task_image_env.c, --squash-env) and squash-shell's
 * command (--env) share, defined once.
 *
 * Which ones: the names the user gave in every image that defines them,
 * or, without names, each image's default-env; "none" applies none. The
 * metadata (image_meta.h) is read once per target, as the caller's rights
 * allow: a merged target (several images at one TARGET) is one tree, and
 * its /.squash/meta is the one the merge shows (the last image holding
 * one), so that image's environments are the target's. Images apply in
 * their list's order, so a later image's prepend-path comes first, as a
 * later image wins in a merge. Refused: metadata that does not parse, a
 * named environment no image defines, and variables an image may not set
 * (squash_env_var_refusal: LD_* only from environments named by the
 * user). */
#ifndef SQUASH_IMAGES_ENV_H
#define SQUASH_IMAGES_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "image_meta.h"
#include "squash.pb-c.h"

#define SQUASH_ENV_NAMES_NONE "none" /* the option's word for no environment */
#define SQUASH_ENV_NAMES_MAX 64

/* The longest IMAGE of "IMAGE:ENV" (a file name). */
#define SQUASH_ENV_IMAGE_NAME_MAX 255

/* The names of an option's text, as they are applied: "ENV" in every
 * image, "IMAGE:ENV" in the image whose target's last part is IMAGE (as
 * uenv's --view=NAME:VIEW). */
struct squash_env_names {
	char name[SQUASH_ENV_NAMES_MAX][SQUASH_META_NAME_MAX + 1];
	char image[SQUASH_ENV_NAMES_MAX][SQUASH_ENV_IMAGE_NAME_MAX + 1]; /* "": any */
	bool found[SQUASH_ENV_NAMES_MAX]; /* an image defines it */
	size_t count;
};

/* Splits text (not "none") into names, all found false. option ("--env")
 * starts the messages. Returns 0, or -1 with err for a name that is not
 * one, "none" among others, or too many. */
int squash_env_names_split(const char *text, const char *option, struct squash_env_names *names,
			   char *err, size_t errlen);

/* The environment changed: a task's (through SPANK) or this process's. */
struct squash_env_access {
	const char *option; /* the option naming environments, for messages */
	const char *images; /* whose images, for messages: "of this step" */
	/* var's value, malloc'd, *value NULL when unset; 0, or -1 with why. */
	int (*get)(void *ctx, const char *var, char **value, char *why, size_t whylen);
	/* Sets var (value NULL: unsets it); 0, or -1 with why. */
	int (*set)(void *ctx, const char *var, const char *value, char *why, size_t whylen);
	void *ctx;
	/* Where a note goes about a software image (one with environments)
	 * seen at another target than the one it was packed for, whose
	 * rewritten paths lead there (squash-pack(1)); NULL: nowhere. */
	FILE *notes;
};

/* A get for this process's own environment (squash-shell, squash-images
 * activate): var's value, malloc'd. */
int squash_env_own_get(void *ctx, const char *var, char **value, char *why, size_t whylen);

/* Applies the environments of the images of resp (a step_info or
 * session_mount answer, seen at their targets) that text names (the
 * option's text; NULL: the default-envs). Returns 0, or -1 with err. */
int squash_images_env_apply(const Squash__Response *resp, const char *text,
			    const struct squash_env_access *env, char *err, size_t errlen);

#endif

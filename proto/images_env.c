/* The images' environments applied (see images_env.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "images_env.h"
#include "quote.h"
#include "squash_env.h"

/* The image part of "IMAGE:ENV": the last component of a target. */
static bool image_name_valid(const char *s, size_t n)
{
	if (n == 0 || n > SQUASH_ENV_IMAGE_NAME_MAX || memchr(s, '/', n))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

int squash_env_names_split(const char *text, const char *option, struct squash_env_names *names,
			   char *err, size_t errlen)
{
	const char *p = text;

	names->count = 0;
	while (1) {
		size_t n = strcspn(p, ","), in = 0;
		const char *colon = memchr(p, ':', n);

		/* Before anything is written to the entry it would take. */
		if (names->count == SQUASH_ENV_NAMES_MAX) {
			squash_errf(err, errlen, "%s: at most %d names of at most %d characters", option,
				    SQUASH_ENV_NAMES_MAX, SQUASH_META_NAME_MAX);
			return -1;
		}
		char *name = names->name[names->count], *image = names->image[names->count];

		if (colon) {
			in = (size_t)(colon - p);
			if (!image_name_valid(p, in)) {
				char shown[SQUASH_QUOTE_BUF];

				squash_errf(err, errlen, "%s: '%s' is not an image's name (the last part of "
					    "its target, as in /squash/NAME) before ':ENV'", option,
					    squash_quote(shown, sizeof shown, p, in));
				return -1;
			}
			memcpy(image, p, in); /* in <= SQUASH_ENV_IMAGE_NAME_MAX: image_name_valid */
			image[in] = '\0';
			p += in + 1;
			n -= in + 1;
		} else {
			image[0] = '\0';
		}
		if (n > SQUASH_META_NAME_MAX) {
			squash_errf(err, errlen, "%s: at most %d names of at most %d characters", option,
				    SQUASH_ENV_NAMES_MAX, SQUASH_META_NAME_MAX);
			return -1;
		}
		memcpy(name, p, n);
		name[n] = '\0';
		if (!strcmp(name, SQUASH_ENV_NAMES_NONE)) {
			squash_errf(err, errlen, "%s: 'none' stands alone (it means no environment)",
				    option);
			return -1;
		}
		if (!squash_env_view_name_valid(name)) {
			char shown[SQUASH_QUOTE_BUF];

			squash_errf(err, errlen, "%s: '%s' is not an environment name (letters, digits, "
				    "'_', '-' and '.', starting with a letter or '_'; names separated by ',', "
				    "each maybe after IMAGE:)", option, squash_quote(shown, sizeof shown, name, n));
			return -1;
		}
		names->found[names->count++] = false;
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

/* Whether names' entry k is for the image at target: any image, or the
 * one whose target ends in its IMAGE. */
static bool for_target(const struct squash_env_names *names, size_t k, const char *target)
{
	const char *last = strrchr(target, '/');

	return !names->image[k][0] || !strcmp(names->image[k], last ? last + 1 : target);
}

static int apply_ops(const struct squash_env_ops *ops, const struct squash_env_access *env,
		     char *err, size_t errlen)
{
	for (size_t i = 0; i < ops->count; i++) {
		const struct squash_env_op *op = &ops->op[i];
		char *current, *next;
		int rc;

		if (op->kind == SQUASH_ENV_UNSET) {
			if (env->set(env->ctx, op->var, NULL, err, errlen))
				return -1;
			continue;
		}
		if (env->get(env->ctx, op->var, &current, err, errlen))
			return -1;
		next = squash_env_op_result(op, current);
		free(current);
		if (!next) {
			squash_errf(err, errlen, "out of memory");
			return -1;
		}
		rc = env->set(env->ctx, op->var, next, err, errlen);
		free(next);
		if (rc)
			return -1;
	}
	return 0;
}

/* Applies environment name of meta (the image seen at target). */
static int apply_env(const struct squash_image_meta *meta, const char *name, const char *target,
		     bool by_name, const struct squash_env_access *env, char *err, size_t errlen)
{
	struct squash_env_ops ops;
	char why[512];
	int rc;

	if (squash_image_env_ops(meta, name, target, by_name, &ops, why, sizeof why)) {
		squash_errf(err, errlen, "%s/%s: %s", target, meta->file, why);
		return -1;
	}
	rc = apply_ops(&ops, env, why, sizeof why);
	squash_env_ops_free(&ops);
	if (rc)
		squash_errf(err, errlen, "environment %s of %s: %s", name, target, why);
	return rc;
}

/* The environments each target has, for the message about a name none
 * has: "/squash/a (x, y), /squash/b (none)". */
static void list_envs(const char *target, const struct squash_image_meta *meta, char *buf,
		      size_t size)
{
	size_t len = strlen(buf);
	bool first = true;

	snprintf(buf + len, size - len, "%s%s (", len ? ", " : "", target);
	for (size_t i = 0; i < meta->n_env; i++) {
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(meta->env[j].env, meta->env[i].env);
		if (seen)
			continue;
		len = strlen(buf);
		snprintf(buf + len, size - len, "%s%s", first ? "" : ", ", meta->env[i].env);
		first = false;
	}
	len = strlen(buf);
	snprintf(buf + len, size - len, "%s)", first ? "none" : "");
}

/* A software image away from the target it was packed for. Data images
 * (no environments) work anywhere and get no note. */
static void note_moved(const struct squash_image_meta *meta, const char *target, FILE *notes)
{
	char packed[SQUASH_QUOTE_BUF], seen[SQUASH_QUOTE_BUF];

	if (!notes || !meta->target || !meta->n_env || !strcmp(meta->target, target))
		return;
	squash_quote(packed, sizeof packed, meta->target, strlen(meta->target));
	squash_quote(seen, sizeof seen, target, strlen(target));
	if (!strcmp(meta->file, SQUASH_UENV_META_PATH))
		fprintf(notes, "squash: note: the image at %s was built for %s (its %s): paths inside it "
			"may lead there, not here; mount it at %s (IMAGE:%s, where the site allows that "
			"target)\n", seen, packed, SQUASH_UENV_META_PATH, packed, packed);
	else
		fprintf(notes, "squash: note: the image at %s was packed for %s: paths squash-pack rewrote in "
			"it lead there, not here; mount it at %s (IMAGE:%s), or pack it again with --target "
			"%s\n", seen, packed, packed, packed, seen);
}

/* "TARGET:ENV" added to the applied list (SQUASH_ENV_TASK_ENVS), a comma
 * before all but the first. 0, or -1 out of memory. */
static int note_applied(char **applied, size_t *len, const char *target, const char *name)
{
	size_t add = strlen(target) + strlen(name) + 2;
	char *grown = realloc(*applied, *len + add + 1);

	if (!grown)
		return -1;
	*applied = grown;
	*len += (size_t)sprintf(grown + *len, "%s%s:%s", *len ? "," : "", target, name);
	return 0;
}

/* Applies environment name of meta at target and notes it as applied. */
static int apply_noted(const struct squash_image_meta *meta, const char *name, const char *target,
		       bool by_name, const struct squash_env_access *env, char **applied,
		       size_t *applied_len, char *err, size_t errlen)
{
	if (apply_env(meta, name, target, by_name, env, err, errlen))
		return -1;
	if (note_applied(applied, applied_len, target, name)) {
		squash_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* One target's metadata: its default-env, or the named ones it has. */
static int apply_target(const struct squash_image_meta *meta, const char *target,
			struct squash_env_names *names, const struct squash_env_access *env,
			char **applied, size_t *applied_len, char *err, size_t errlen)
{
	if (!names)
		return meta->default_env ? apply_noted(meta, meta->default_env, target, false, env,
						       applied, applied_len, err, errlen)
					 : 0;
	for (size_t k = 0; k < names->count; k++) {
		if (!for_target(names, k, target) || !squash_image_meta_has_env(meta, names->name[k]))
			continue;
		names->found[k] = true;
		if (apply_noted(meta, names->name[k], target, true, env, applied, applied_len, err,
				errlen))
			return -1;
	}
	return 0;
}

int squash_images_env_apply(const Squash__Response *resp, const char *text,
			    const struct squash_env_access *env, char *err, size_t errlen)
{
	struct squash_image_meta meta;
	struct squash_env_names *names = NULL;
	char have[1024] = "", *applied = NULL;
	size_t applied_len = 0;
	int rc = 0;

	if (text && !strcmp(text, SQUASH_ENV_NAMES_NONE))
		return 0;
	if (text) {
		names = calloc(1, sizeof(*names));
		if (!names) {
			squash_errf(err, errlen, "out of memory");
			return -1;
		}
		if (squash_env_names_split(text, env->option, names, err, errlen)) {
			free(names);
			return -1;
		}
	}
	for (size_t i = 0; i < resp->n_job_mounts && !rc; i++) {
		const char *target = resp->job_mounts[i]->target;
		int loaded;

		if (squash_mount_repeats_target(resp, i))
			continue; /* a merged target: one tree, read once */
		loaded = squash_image_meta_load(target, &meta, err, errlen);
		if (loaded < 0) {
			rc = -1;
		} else if (loaded) {
			note_moved(&meta, target, env->notes);
			list_envs(target, &meta, have, sizeof have);
			rc = apply_target(&meta, target, names, env, &applied, &applied_len, err, errlen);
			squash_image_meta_free(&meta);
		}
	}
	for (size_t k = 0; names && !rc && k < names->count; k++) {
		if (!names->found[k] && names->image[k][0]) {
			squash_errf(err, errlen, "%s=%s: no image %s at a target named %s defines the "
				    "environment %s (the images' environments: %s)", env->option, text,
				    env->images, names->image[k], names->name[k],
				    *have ? have : "none, no image has metadata");
			rc = -1;
		} else if (!names->found[k]) {
			squash_errf(err, errlen, "%s=%s: no image %s defines the environment %s (the "
				    "images' environments: %s)", env->option, text, env->images,
				    names->name[k], *have ? have : "none, no image has metadata");
			rc = -1;
		}
	}
	/* Which ones this environment got, as uenv's UENV_VIEW tells. */
	if (!rc)
		rc = env->set(env->ctx, SQUASH_ENV_TASK_ENVS, applied ? applied : "", err, errlen);
	free(applied);
	free(names);
	return rc;
}

int squash_env_own_get(void *ctx, const char *var, char **value, char *why, size_t whylen)
{
	const char *v = getenv(var);

	(void)ctx;
	*value = NULL;
	if (v && !(*value = strdup(v))) {
		squash_errf(why, whylen, "out of memory");
		return -1;
	}
	return 0;
}

/* Images' environments in a task (see task_image_env.h). */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env_option.h"
#include "image_meta.h"
#include "squash_env.h"
#include "task_image_env.h"

/* Environment values larger than this are not grown into (PATH and the
 * like are far smaller). */
#define TASK_ENV_VALUE_MAX (1024 * 1024)

/* The task's value of var, malloc'd; *value NULL when unset. -1 when it
 * cannot be read. */
static int task_getenv(spank_t sp, const char *var, char **value)
{
	size_t size = 4096;

	*value = NULL;
	while (size <= TASK_ENV_VALUE_MAX) {
		char *buf = malloc(size);
		spank_err_t rc;

		if (!buf)
			return -1;
		rc = spank_getenv(sp, var, buf, (int)size);
		if (rc == ESPANK_SUCCESS) {
			*value = buf;
			return 0;
		}
		free(buf);
		if (rc == ESPANK_ENV_NOEXIST)
			return 0;
		if (rc != ESPANK_NOSPACE)
			return -1;
		size *= 4;
	}
	return -1;
}

static int apply_ops(spank_t sp, const struct squash_env_ops *ops, char *err, size_t errlen)
{
	for (size_t i = 0; i < ops->count; i++) {
		const struct squash_env_op *op = &ops->op[i];
		char *current, *next;
		spank_err_t rc;

		if (task_getenv(sp, op->var, &current)) {
			snprintf(err, errlen, "cannot read the task's %s", op->var);
			return -1;
		}
		next = squash_env_op_result(op, current);
		free(current);
		if (!next) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		rc = spank_setenv(sp, op->var, next, 1);
		free(next);
		if (rc != ESPANK_SUCCESS) {
			snprintf(err, errlen, "cannot set the task's %s: %s", op->var, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

/* Applies environment name of meta (the image seen at target). */
static int apply_env(spank_t sp, const struct squash_image_meta *meta, const char *name,
		     const char *target, bool by_name, char *err, size_t errlen)
{
	struct squash_env_ops ops;
	char why[512];
	int rc;

	if (squash_image_env_ops(meta, name, target, by_name, &ops, why, sizeof why)) {
		snprintf(err, errlen, "%s/%s: %s", target, SQUASH_META_PATH, why);
		return -1;
	}
	rc = apply_ops(sp, &ops, why, sizeof why);
	squash_env_ops_free(&ops);
	if (rc)
		snprintf(err, errlen, "environment %s of %s: %s", name, target, why);
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

/* One target's metadata: its default-env, or the named ones it has. */
static int apply_target(spank_t sp, const struct squash_image_meta *meta, const char *target,
			struct squash_env_names *names, char *err, size_t errlen)
{
	if (!names)
		return meta->default_env ? apply_env(sp, meta, meta->default_env, target, false, err, errlen)
					 : 0;
	for (size_t k = 0; k < names->count; k++) {
		if (!squash_image_meta_has_env(meta, names->name[k]))
			continue;
		names->found[k] = true;
		if (apply_env(sp, meta, names->name[k], target, true, err, errlen))
			return -1;
	}
	return 0;
}

int squash_task_image_env_apply(spank_t sp, const Squash__Response *resp, const char *option,
				char *err, size_t errlen)
{
	struct squash_image_meta meta;
	struct squash_env_names *names = NULL;
	char have[1024] = "";
	int rc = 0;

	if (option && !strcmp(option, SQUASH_ENV_OPTION_NONE))
		return 0;
	if (option) {
		names = calloc(1, sizeof(*names));
		if (!names) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (squash_env_names_split(option, names, err, errlen)) {
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
			list_envs(target, &meta, have, sizeof have);
			rc = apply_target(sp, &meta, target, names, err, errlen);
			squash_image_meta_free(&meta);
		}
	}
	for (size_t k = 0; names && !rc && k < names->count; k++) {
		if (!names->found[k]) {
			snprintf(err, errlen, "--squash-env=%s: no image of this step defines the "
				 "environment %s (the images' environments: %s)", option,
				 names->name[k], *have ? have : "none, no image has a /.squash/meta");
			rc = -1;
		}
	}
	free(names);
	return rc;
}

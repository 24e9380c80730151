/* An image's named environment as variable operations (see image_meta.h). */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "image_meta.h"

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

const char *squash_env_var_refusal(const char *var, bool by_name)
{
	if (starts_with(var, "SLURM_") || starts_with(var, "SPANK_"))
		return "Slurm's variables (SLURM_*, SPANK_*) are not an image's to set";
	if (starts_with(var, "SQUASH_"))
		return "slurm-squash's variables (SQUASH_*) are not an image's to set";
	/* LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH...: they change what every
	 * program of the task loads, so only on the user's explicit word. */
	if (starts_with(var, "LD_") && !by_name)
		return "loader variables (LD_*) are applied only from an environment you name "
		       "(--squash-env; squash-shell --env), not from an image's default-env";
	return NULL;
}

/* MOUNT/path, or MOUNT for the mount point itself. */
static char *mount_path(const char *mount, const char *path)
{
	char *out;

	if (!*path)
		return strdup(mount);
	if (asprintf(&out, "%s/%s", mount, path) < 0)
		return NULL;
	return out;
}

int squash_image_env_ops(const struct squash_image_meta *meta, const char *env_name,
			 const char *mount, bool by_name, struct squash_env_ops *ops, char *err,
			 size_t errlen)
{
	bool found = false;

	memset(ops, 0, sizeof *ops);
	for (size_t i = 0; i < meta->n_env; i++) {
		const struct squash_env_line *e = &meta->env[i];
		struct squash_env_op *op = &ops->op[ops->count];
		const char *why;

		if (strcmp(e->env, env_name))
			continue;
		found = true;
		if (e->kind == SQUASH_ENV_NOTHING)
			continue;
		if (e->kind == SQUASH_ENV_REFUSED) {
			squash_errf(err, errlen, "environment %s cannot be applied: %s", env_name, e->value);
			squash_env_ops_free(ops);
			return -1;
		}
		why = squash_env_var_refusal(e->var, by_name);
		if (why) {
			char at[32] = "";
			if (e->line)
				snprintf(at, sizeof at, "line %u: ", e->line);
			squash_errf(err, errlen, "%senvironment %s sets %s: %s", at, env_name, e->var, why);
			squash_env_ops_free(ops);
			return -1;
		}
		op->kind = e->kind == SQUASH_ENV_SET_PATH ? SQUASH_ENV_SET : e->kind;
		op->var = e->var;
		op->value = e->kind == SQUASH_ENV_SET || e->kind == SQUASH_ENV_UNSET || e->absolute
				    ? strdup(e->value)
				    : mount_path(mount, e->value);
		if (!op->value) {
			squash_errf(err, errlen, "out of memory");
			squash_env_ops_free(ops);
			return -1;
		}
		ops->count++;
	}
	if (!found) {
		squash_errf(err, errlen, "no environment %s", env_name);
		return -1;
	}
	return 0;
}

void squash_env_ops_free(struct squash_env_ops *ops)
{
	for (size_t i = 0; i < ops->count; i++)
		free(ops->op[i].value);
	ops->count = 0;
}

/* list without the entries equal to item, malloc'd. */
static char *without(const char *list, const char *item)
{
	size_t n = strlen(item);
	char *out = malloc(strlen(list) + 1), *w = out;

	if (!out)
		return NULL;
	for (const char *p = list;;) {
		size_t len = strcspn(p, ":");

		if (!(len == n && !memcmp(p, item, n))) {
			if (w != out)
				*w++ = ':';
			memcpy(w, p, len);
			w += len;
		}
		if (!p[len])
			break;
		p += len + 1;
	}
	*w = '\0';
	return out;
}

/* Search paths whose empty element stands for the system's own list: man
 * (man-db's manpath(5)) and info read "DIR:" as DIR, then their defaults.
 * Set to the image's directory alone, they would hide every man page and
 * info manual of the node. */
static bool keeps_system_default(const char *var)
{
	return !strcmp(var, "MANPATH") || !strcmp(var, "INFOPATH");
}

/* The path alone, with the system's list kept (an empty element) where the
 * variable has one. */
static char *first_path(const struct squash_env_op *op)
{
	char *out;

	if (op->kind == SQUASH_ENV_SET || !keeps_system_default(op->var))
		return strdup(op->value);
	if (asprintf(&out, op->kind == SQUASH_ENV_PREPEND_PATH ? "%s:" : ":%s", op->value) < 0)
		return NULL;
	return out;
}

char *squash_env_op_result(const struct squash_env_op *op, const char *current)
{
	char *rest, *out;
	int n;

	if (op->kind == SQUASH_ENV_SET || !current || !*current)
		return first_path(op);
	/* Moved, not repeated: a step inherits the environment its batch
	 * script already got, and applying it again changes nothing. */
	rest = without(current, op->value);
	if (!rest)
		return NULL;
	if (!*rest) {
		free(rest);
		return first_path(op);
	} else if (op->kind == SQUASH_ENV_PREPEND_PATH)
		n = asprintf(&out, "%s:%s", op->value, rest);
	else
		n = asprintf(&out, "%s:%s", rest, op->value);
	free(rest);
	return n < 0 ? NULL : out;
}

/* A uenv image's meta/env.json as an image's metadata (image_meta.h):
 * uenv's images (CSCS; squashfs built by Stackinator for one mount point)
 * name their views there, each a list of changes to variables, so that
 * users coming from uenv keep `--view=NAME` as `--squash-env=NAME`.
 *
 * What uenv writes, and what each part becomes:
 *   "mount": "/user-environment"        the target (paths below it are
 *                                       relocated to where the image is seen)
 *   "views": { NAME: { "env": { "values": {
 *       "list":   { VAR: [ { "op": "prepend"|"append"|"set"|"unset",
 *                            "value": [ PATH, ... ] }, ... ] },
 *       "scalar": { VAR: STRING | null } } } } }
 * A view without "env" only has an activation script, which uenv itself
 * no longer runs: refused when named, as is one this file cannot apply. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "image_meta.h"
#include "json_value.h"
#include "quote.h"

#define UENV_VALUE_MAX 4095

/* Why a view cannot be applied (its first problem), or set by add_line
 * when memory runs out. */
struct view_build {
	struct squash_image_meta *meta;
	const char *view;
	size_t first; /* its first line */
	char why[256];
	bool out_of_memory;
};

__attribute__((format(printf, 2, 3))) static bool refuse(struct view_build *b, const char *fmt, ...)
{
	va_list ap;

	if (!b->why[0]) {
		va_start(ap, fmt);
		vsnprintf(b->why, sizeof b->why, fmt, ap);
		va_end(ap);
	}
	return false;
}

static bool add_line(struct view_build *b, enum squash_env_op_kind kind, const char *var, const char *value,
		     size_t value_len, bool absolute)
{
	struct squash_image_meta *meta = b->meta;
	struct squash_env_line *e;

	if (meta->n_env == SQUASH_META_MAX_ENV_OPS)
		return refuse(b, "more than %d variable operations in the image's views",
			      SQUASH_META_MAX_ENV_OPS);
	e = &meta->env[meta->n_env];
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->absolute = absolute;
	e->env = strdup(b->view);
	e->var = strdup(var);
	e->value = strndup(value, value_len);
	if (!e->env || !e->var || !e->value) {
		free(e->env);
		free(e->var);
		free(e->value);
		memset(e, 0, sizeof *e);
		b->out_of_memory = true;
		return refuse(b, "out of memory");
	}
	meta->n_env++;
	return true;
}

/* Whether path lies in the image seen at target (1; 0 when not, -1 when
 * out of memory): the relative rest, with "." and empty components
 * dropped, into *rel (malloc'd; "" for the target itself). A path with a
 * ".." component is kept as written. */
static int below_target(const char *target, const char *path, char **rel)
{
	size_t n = target ? strlen(target) : 0;

	*rel = NULL;
	if (!n || strncmp(path, target, n) || (path[n] && path[n] != '/') ||
	    squash_meta_has_dotdot(path + n, strlen(path + n)))
		return 0;
	*rel = squash_meta_path_normalised(path + n, strlen(path + n));
	return *rel ? 1 : -1;
}

static bool value_ok(struct view_build *b, const struct squash_json *v, const char *var, bool path)
{
	if (!v || v->type != SQUASH_JSON_STRING)
		return refuse(b, "a value of %s is not a string", var);
	if (strlen(v->text) > UENV_VALUE_MAX || !squash_meta_text_printable(v->text, strlen(v->text)))
		return refuse(b, "a value of %s is not printable text of at most 4095 bytes", var);
	if (path && (!v->text[0] || strchr(v->text, ':')))
		return refuse(b, "a path of %s is empty or holds ':', the separator of search paths", var);
	return true;
}

/* One path or value of var: relocated when it lies in the image. */
static bool add_value(struct view_build *b, enum squash_env_op_kind path_kind, enum squash_env_op_kind literal_kind,
		      const char *var, const char *value)
{
	char *rel = NULL;
	bool ok;
	/* A scalar holding a list (A:B) is kept as written: only a path
	 * follows the image. */
	int below = strchr(value, ':') ? 0 : below_target(b->meta->target, value, &rel);

	if (below < 0) {
		b->out_of_memory = true;
		return refuse(b, "out of memory");
	}
	if (below)
		ok = add_line(b, path_kind, var, rel, strlen(rel), false);
	else
		ok = add_line(b, literal_kind, var, value, strlen(value), literal_kind != SQUASH_ENV_SET);
	free(rel);
	return ok;
}

/* One update of a list variable, in the order uenv applies it: "prepend"
 * of [a, b] makes a:b:$VAR, "append" $VAR:a:b, "set" a:b. */
static bool add_list_update(struct view_build *b, const char *var, const struct squash_json *u)
{
	const struct squash_json *op = squash_json_member(u, "op"), *values = squash_json_member(u, "value");
	const struct squash_json *v;
	size_t count = 0;

	if (!op || op->type != SQUASH_JSON_STRING || !values || values->type != SQUASH_JSON_ARRAY)
		return refuse(b, "an update of %s is not {\"op\": ..., \"value\": [...]}", var);
	for (v = values->child; v; v = v->next, count++)
		if (!value_ok(b, v, var, true))
			return false;
	/* Bounded before the prepend's walk below, which goes back each time. */
	if (count > SQUASH_META_MAX_ENV_OPS)
		return refuse(b, "more than %d variable operations in the image's views", SQUASH_META_MAX_ENV_OPS);
	if (!strcmp(op->text, "unset"))
		return add_line(b, SQUASH_ENV_UNSET, var, "", 0, false);
	if (!strcmp(op->text, "append") || !strcmp(op->text, "set")) {
		if (!strcmp(op->text, "set") && !add_line(b, SQUASH_ENV_SET, var, "", 0, false))
			return false;
		for (v = values->child; v; v = v->next)
			if (!add_value(b, SQUASH_ENV_APPEND_PATH, SQUASH_ENV_APPEND_PATH, var, v->text))
				return false;
		return true;
	}
	if (strcmp(op->text, "prepend"))
		return refuse(b, "an update of %s has an operation uenv does not define (prepend, append, set, unset)", var);
	/* Each prepended before the one after it: the last first. */
	for (size_t k = count; k > 0; k--) {
		v = values->child;
		for (size_t j = 1; j < k; j++)
			v = v->next;
		if (!add_value(b, SQUASH_ENV_PREPEND_PATH, SQUASH_ENV_PREPEND_PATH, var, v->text))
			return false;
	}
	return true;
}

/* A variable the view may set: a valid name that is not Slurm's or
 * slurm-squash's (those would fail every job naming the view; a view is
 * only ever applied by name, so LD_* may be set). */
static bool var_ok(struct view_build *b, const char *var)
{
	char shown[SQUASH_QUOTE_BUF];
	const char *why;

	if (!squash_env_name_valid(var))
		return refuse(b, "'%s' is not a variable name", squash_quote(shown, sizeof shown, var, strlen(var)));
	if ((why = squash_env_var_refusal(var, true)))
		return refuse(b, "it sets %s: %s", var, why);
	return true;
}

static bool add_view_values(struct view_build *b, const struct squash_json *view)
{
	const struct squash_json *env = squash_json_member(view, "env"), *values, *list, *scalar;

	if (view->type != SQUASH_JSON_OBJECT)
		return refuse(b, "it is not a JSON object");
	if (!env)
		return refuse(b, "it has only an activation script (no \"env\"), which slurm-squash "
				       "does not run (nor does uenv)");
	values = squash_json_member(env, "values");
	list = squash_json_member(values, "list");
	scalar = squash_json_member(values, "scalar");
	if (!values || values->type != SQUASH_JSON_OBJECT || (list && list->type != SQUASH_JSON_OBJECT) ||
	    (scalar && scalar->type != SQUASH_JSON_OBJECT))
		return refuse(b, "its env.values is not an object of \"list\" and \"scalar\" objects");
	for (const struct squash_json *var = list ? list->child : NULL; var; var = var->next) {
		if (!var_ok(b, var->key))
			return false;
		if (var->type != SQUASH_JSON_ARRAY)
			return refuse(b, "the updates of %s are not a list", var->key);
		for (const struct squash_json *u = var->child; u; u = u->next)
			if (!add_list_update(b, var->key, u))
				return false;
	}
	for (const struct squash_json *var = scalar ? scalar->child : NULL; var; var = var->next) {
		if (!var_ok(b, var->key))
			return false;
		if (var->type == SQUASH_JSON_NULL) {
			if (!add_line(b, SQUASH_ENV_UNSET, var->key, "", 0, false))
				return false;
		} else if (!value_ok(b, var, var->key, false) ||
			   !add_value(b, SQUASH_ENV_SET_PATH, SQUASH_ENV_SET, var->key, var->text)) {
			return false;
		}
	}
	return true;
}

/* Adds view name's lines; a view that cannot be applied leaves one
 * REFUSED line saying why instead. -1 when out of memory. */
static int add_view(struct squash_image_meta *meta, const char *name, const struct squash_json *view)
{
	struct view_build b = { .meta = meta, .view = name, .first = meta->n_env };

	if (squash_image_meta_has_env(meta, name)) {
		/* Which one uenv would take is its JSON library's choice: a
		 * name given twice is refused whole when named (a REFUSED line
		 * refuses every line of its environment). */
		snprintf(b.why, sizeof b.why, "it is defined twice in the file");
	} else if (add_view_values(&b, view)) {
		/* A view that changes nothing is one all the same. */
		if (meta->n_env == b.first && !add_line(&b, SQUASH_ENV_NOTHING, "", "", 0, false))
			return b.out_of_memory ? -1 : 0;
		return 0;
	}
	if (b.out_of_memory)
		return -1;
	while (meta->n_env > b.first) {
		struct squash_env_line *e = &meta->env[--meta->n_env];
		free(e->env);
		free(e->var);
		free(e->value);
		memset(e, 0, sizeof *e);
	}
	if (!add_line(&b, SQUASH_ENV_REFUSED, "", b.why, strlen(b.why), false))
		return b.out_of_memory ? -1 : 0; /* no room left: the view is not there */
	return 0;
}

/* A string member kept when check accepts it. -1 when out of memory. */
static int keep_string(const struct squash_json *root, const char *key, char **field,
		       bool (*check)(const char *s, size_t n))
{
	const struct squash_json *v = squash_json_member(root, key);

	if (!v || v->type != SQUASH_JSON_STRING || !check(v->text, strlen(v->text)))
		return 0;
	*field = strdup(v->text);
	return *field ? 0 : -1;
}

static bool description_ok(const char *s, size_t n)
{
	return n > 0 && n <= UENV_VALUE_MAX && squash_meta_text_printable(s, n);
}

static bool target_ok(const char *s, size_t n)
{
	return squash_meta_target_valid(s, n) && squash_meta_text_printable(s, n);
}

int squash_image_meta_from_uenv(const char *text, size_t len, struct squash_image_meta *meta,
				char *err, size_t errlen)
{
	char why[256];
	struct squash_json *root = squash_json_parse(text, len, why, sizeof why);
	const struct squash_json *views = squash_json_member(root, "views");
	int rc = 1;

	memset(meta, 0, sizeof *meta);
	if (!root && errno == ENOMEM) {
		squash_errf(err, errlen, "out of memory");
		return -1;
	}
	if (!root || !views || views->type != SQUASH_JSON_OBJECT) {
		squash_errf(err, errlen, "not uenv's metadata: %s", root ? "no \"views\" object" : why);
		squash_json_free(root);
		return 0;
	}
	if (keep_string(root, "mount", &meta->target, target_ok) ||
	    keep_string(root, "name", &meta->name, squash_meta_label_valid) ||
	    keep_string(root, "description", &meta->description, description_ok))
		rc = -1;
	for (const struct squash_json *v = views->child; v && rc > 0; v = v->next) {
		/* A name no option can give is left out: it could never be asked for. */
		if (!squash_env_view_name_valid(v->key) || !strcmp(v->key, "none"))
			continue;
		if (add_view(meta, v->key, v) < 0)
			rc = -1;
	}
	squash_json_free(root);
	if (rc < 0) {
		squash_errf(err, errlen, "out of memory");
		squash_image_meta_free(meta);
		return -1;
	}
	meta->file = SQUASH_UENV_META_PATH;
	return 1;
}

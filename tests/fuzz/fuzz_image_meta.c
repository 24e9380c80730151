/* libFuzzer harness: an image's /.squash/meta (proto/image_meta.h), the
 * user's bytes that every task reads, and a uenv image's meta/env.json
 * read the same input (image_meta_uenv.c). Parses the input; an accepted file
 * keeps the bounds callers rely on (at most 64 env lines, valid names, a
 * default-env that exists, no '..' in a path), and each environment turns
 * into operations for a mount point, named and as a default, whose results
 * on a current value are built (or refused with a reason). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_env(const struct squash_image_meta *m, const char *name)
{
	struct squash_env_ops ops;
	char err[512];

	for (int by_name = 0; by_name < 2; by_name++) {
		err[0] = '\0';
		if (squash_image_env_ops(m, name, "/squash/m", by_name, &ops, err, sizeof err) != 0) {
			if (!err[0])
				abort(); /* a refusal always says why */
			continue;
		}
		if (ops.count > SQUASH_META_MAX_ENV_OPS)
			abort();
		for (size_t i = 0; i < ops.count; i++) {
			char *v;

			if (ops.op[i].kind == SQUASH_ENV_REFUSED || ops.op[i].kind == SQUASH_ENV_NOTHING ||
			    squash_env_var_refusal(ops.op[i].var, by_name))
				abort();
			if (ops.op[i].kind == SQUASH_ENV_UNSET)
				continue;
			v = squash_env_op_result(&ops.op[i], "/usr/bin:/squash/m/bin:");
			if (!v)
				abort();
			free(v);
		}
		squash_env_ops_free(&ops);
	}
}

/* A normalised relative path: no leading '/', no "", "." or ".." component. */
static int path_ok(const char *v)
{
	if (!*v)
		return 1; /* the mount point itself */
	for (const char *p = v;; p++) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2)))
			return 0;
		p += n;
		if (!*p)
			return !strchr(v, ':');
	}
}

/* As uenv's meta/env.json: views with valid names, paths relocated only
 * when relative and normalised, every refusal saying why. */
static void check_uenv(const uint8_t *data, size_t size)
{
	struct squash_image_meta m;
	char err[512];

	if (squash_image_meta_from_uenv((const char *)data, size, &m, err, sizeof err) != 1)
		return;
	if (m.n_env > SQUASH_META_MAX_ENV_OPS || m.default_env)
		abort();
	for (size_t i = 0; i < m.n_env; i++) {
		const struct squash_env_line *e = &m.env[i];
		bool path = e->kind == SQUASH_ENV_SET_PATH || e->kind == SQUASH_ENV_PREPEND_PATH ||
			    e->kind == SQUASH_ENV_APPEND_PATH;

		if (!squash_env_view_name_valid(e->env) ||
		    (e->kind != SQUASH_ENV_REFUSED && e->kind != SQUASH_ENV_NOTHING && !squash_env_name_valid(e->var)) ||
		    (path && !e->absolute && !path_ok(e->value)) || (e->kind == SQUASH_ENV_REFUSED && !*e->value))
			abort();
		check_env(&m, e->env);
	}
	squash_image_meta_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct squash_image_meta m;
	char err[512];

	check_uenv(data, size);
	if (squash_image_meta_parse((const char *)data, size, &m, err, sizeof err) != 0)
		return 0;
	if (m.n_env > SQUASH_META_MAX_ENV_LINES)
		abort();
	if (m.default_env && !squash_image_meta_has_env(&m, m.default_env))
		abort();
	for (size_t i = 0; i < m.n_env; i++) {
		const char *v = m.env[i].value;

		if (!squash_env_name_valid(m.env[i].env) || !squash_env_name_valid(m.env[i].var))
			abort();
		if (m.env[i].kind != SQUASH_ENV_SET && !path_ok(v))
			abort();
		check_env(&m, m.env[i].env);
	}
	squash_image_meta_free(&m);
	return 0;
}

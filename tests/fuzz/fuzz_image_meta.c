/* libFuzzer harness: an image's /.squash/meta (proto/image_meta.h), the
 * user's bytes that every task reads. Parses the input; an accepted file
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
		if (ops.count == 0 || ops.count > SQUASH_META_MAX_ENV_LINES)
			abort();
		for (size_t i = 0; i < ops.count; i++) {
			char *v = squash_env_op_result(&ops.op[i], "/usr/bin:/squash/m/bin:");

			if (!v || squash_env_var_refusal(ops.op[i].var, by_name))
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct squash_image_meta m;
	char err[512];

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

#include "config.h"
#include "util/mountinfo_kept.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls each(line, m, ctx) per line that parses; line is the line as read. */
static int each_line(const char *path, int (*each)(const char *line, const struct squash_mount *m, void *ctx),
		     void *ctx)
{
	FILE *f = fopen(path, "re");
	char *line = NULL, *work = NULL;
	size_t line_cap = 0, work_cap = 0;
	ssize_t n;
	int rc = 0;

	if (!f)
		return -1;
	while (rc == 0 && (n = getline(&line, &line_cap, f)) > 0) {
		struct squash_mount m;

		if ((size_t)n + 1 > work_cap) {
			char *grown = realloc(work, (size_t)n + 1);

			if (!grown) {
				rc = -1;
				break;
			}
			work = grown;
			work_cap = (size_t)n + 1;
		}
		memcpy(work, line, (size_t)n + 1);
		if (squash_mountinfo_parse(work, &m) == 0)
			rc = each(line, &m, ctx);
	}
	free(line);
	free(work);
	fclose(f);
	return rc < 0 ? -1 : 0;
}

struct each_ctx {
	int (*each)(const struct squash_mount *m, void *ctx);
	void *ctx;
};

static int call_each(const char *line, const struct squash_mount *m, void *arg)
{
	struct each_ctx *e = arg;

	(void)line;
	return e->each(m, e->ctx) ? 1 : 0;
}

int mountinfo_each(const char *path, int (*each)(const struct squash_mount *m, void *ctx), void *ctx)
{
	struct each_ctx e = { each, ctx };

	return each_line(path, call_each, &e);
}

struct kept_ctx {
	bool (*keep)(const struct squash_mount *m, void *ctx);
	void *ctx;
	char *text;
	size_t len, cap;
};

static int keep_line(const char *line, const struct squash_mount *m, void *arg)
{
	struct kept_ctx *k = arg;
	size_t n = strlen(line);

	if (!k->keep(m, k->ctx))
		return 0;
	if (k->len + n + 1 > k->cap) {
		size_t cap = k->cap ? k->cap : 4096;

		while (cap < k->len + n + 1)
			cap *= 2;
		char *grown = realloc(k->text, cap);
		if (!grown)
			return -1;
		k->text = grown;
		k->cap = cap;
	}
	memcpy(k->text + k->len, line, n + 1);
	k->len += n;
	return 0;
}

char *mountinfo_kept(const char *path, bool (*keep)(const struct squash_mount *m, void *ctx), void *ctx)
{
	struct kept_ctx k = { keep, ctx, NULL, 0, 0 };

	if (each_line(path, keep_line, &k) < 0) {
		free(k.text);
		return NULL;
	}
	return k.text ? k.text : strdup("");
}

bool mountinfo_below(const struct squash_mount *m, void *dir)
{
	size_t n = strlen(dir);

	return strncmp(m->mount_point, dir, n) == 0 && (m->mount_point[n] == '/' || m->mount_point[n] == '\0');
}

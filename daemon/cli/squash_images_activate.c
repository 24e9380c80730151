/* squash-images activate NAME[,NAME...]: the images' environments for a
 * shell that is already running (in a job, or squash-shell's), as uenv's
 * `uenv view NAME` in a uenv session: prints the shell commands that apply
 * them, for `eval "$(squash-images activate dev)"`. The images are those
 * the step or session sees (SQUASH_MOUNTS, set with them), their metadata
 * read from their targets with the caller's rights, and the environments
 * applied by the rules the tasks' own follow (proto/images_env.h). */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "images_env.h"
#include "squash_env.h"
#include "cli/squash_images.h"

/* The variables changed, in the order first changed (each printed once,
 * with its last value). */
struct changes {
	char **var;
	size_t count, size;
};

static int note_change(struct changes *ch, const char *var)
{
	for (size_t i = 0; i < ch->count; i++)
		if (!strcmp(ch->var[i], var))
			return 0;
	if (ch->count == ch->size) {
		size_t size = ch->size ? 2 * ch->size : 16;
		char **grown = realloc(ch->var, size * sizeof(*grown));
		if (!grown)
			return -1;
		ch->var = grown;
		ch->size = size;
	}
	if (!(ch->var[ch->count] = strdup(var)))
		return -1;
	ch->count++;
	return 0;
}

/* value without the ','-separated items already in before, after them. */
static char *merged_list(const char *before, const char *value)
{
	size_t blen = strlen(before);
	char *out = malloc(blen + strlen(value) + 2), *w;

	if (!out)
		return NULL;
	memcpy(out, before, blen + 1);
	w = out + blen;
	for (const char *p = value; *p;) {
		size_t n = strcspn(p, ",");
		bool seen = false;

		for (const char *q = before; *q && !seen;) {
			size_t m = strcspn(q, ",");
			seen = m == n && !memcmp(p, q, n);
			q += m + (q[m] == ',');
		}
		if (!seen && n) {
			*w++ = ',';
			memcpy(w, p, n);
			w += n;
		}
		p += n + (p[n] == ',');
	}
	*w = '\0';
	return out;
}

/* Applied here first, so that a later operation on the same variable sees
 * it; printed at the end. SQUASH_ENVS grows: the environments applied
 * before stay applied. */
static int own_setenv(void *ctx, const char *var, const char *value, char *why, size_t whylen)
{
	const char *before = getenv(var);
	char *merged = NULL;
	int rc;

	if (value && !strcmp(var, SQUASH_ENV_TASK_ENVS) && before && *before) {
		if (!(merged = merged_list(before, value))) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		value = merged;
	}
	errno = 0;
	rc = value ? setenv(var, value, 1) : unsetenv(var);
	free(merged);
	if (rc || note_change(ctx, var)) {
		snprintf(why, whylen, "cannot set %s: %s", var, strerror(errno ? errno : ENOMEM));
		return -1;
	}
	return 0;
}

/* value in single quotes, each ' written as '\''. */
static void print_quoted(FILE *out, const char *value)
{
	fputc('\'', out);
	for (const char *p = value; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", out);
		else
			fputc(*p, out);
	}
	fputc('\'', out);
}

/* A step_info-like answer of the targets in SQUASH_MOUNTS (':'-separated;
 * a repeated one is a merged target, read once as the tasks do), into
 * resp, over *copy and *mounts (the caller frees both). */
static int mounts_seen(Squash__Response *resp, char **copy, Squash__JobMount **mounts, char *err,
		       size_t errlen)
{
	const char *list = getenv(SQUASH_ENV_TASK_MOUNTS);
	size_t n = 1;

	if (!list || !*list) {
		snprintf(err, errlen, "no images here: %s is not set (run it in a job step or a squash-shell "
			 "session that has images)", SQUASH_ENV_TASK_MOUNTS);
		return -1;
	}
	for (const char *p = list; *p; p++)
		n += *p == ':';
	*copy = strdup(list);
	*mounts = calloc(n, sizeof(**mounts));
	resp->job_mounts = calloc(n, sizeof(*resp->job_mounts));
	if (!*copy || !*mounts || !resp->job_mounts) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (char *t = strtok(*copy, ":"); t; t = strtok(NULL, ":")) {
		Squash__JobMount *m = &(*mounts)[resp->n_job_mounts];

		squash__job_mount__init(m);
		m->image = t;
		m->target = t;
		resp->job_mounts[resp->n_job_mounts++] = m;
	}
	return 0;
}

int squash_images_activate(const char *names, FILE *out)
{
	Squash__Response resp = SQUASH__RESPONSE__INIT;
	struct changes ch = { 0 };
	const struct squash_env_access env = {
		.option = "activate",
		.images = "here",
		.get = squash_env_own_get,
		.set = own_setenv,
		.ctx = &ch,
		.notes = stderr,
	};
	Squash__JobMount *mounts = NULL;
	char err[2048], *copy = NULL;
	int rc = 1;

	if (!strcmp(names, SQUASH_ENV_NAMES_NONE)) {
		fprintf(stderr, "squash-images: activate: name the environments to apply ('none' is for "
			"--squash-env)\n");
		fputs("false\n", out);
		return 2;
	}
	if (mounts_seen(&resp, &copy, &mounts, err, sizeof err) == 0 &&
	    squash_images_env_apply(&resp, names, &env, err, sizeof err) == 0) {
		for (size_t i = 0; i < ch.count; i++) {
			const char *v = getenv(ch.var[i]);

			if (v) {
				fprintf(out, "export %s=", ch.var[i]);
				print_quoted(out, v);
				fputc('\n', out);
			} else {
				fprintf(out, "unset %s\n", ch.var[i]);
			}
		}
		rc = 0;
	} else {
		fprintf(stderr, "squash-images: %s\n", err);
		/* The caller evals what is printed: make that fail too. */
		fputs("false\n", out);
	}
	for (size_t i = 0; i < ch.count; i++)
		free(ch.var[i]);
	free(ch.var);
	free(mounts);
	free(resp.job_mounts);
	free(copy);
	return rc;
}

/* An image's metadata without mounting it (see image_meta_show.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/image_meta_show.h"
#include "cli/json_escape.h"
#include "cli/reader_cat.h"
#include "image_meta.h"

static const char *op_word(enum squash_env_op_kind kind)
{
	switch (kind) {
	case SQUASH_ENV_SET: return "set";
	case SQUASH_ENV_SET_PATH: return "set-path";
	case SQUASH_ENV_PREPEND_PATH: return "prepend-path";
	case SQUASH_ENV_APPEND_PATH: return "append-path";
	case SQUASH_ENV_UNSET: return "unset";
	case SQUASH_ENV_REFUSED: return "refused";
	case SQUASH_ENV_NOTHING: return "nothing";
	}
	return "?";
}

struct field {
	const char *key;
	const char *value;
};

static void fields_of(const struct squash_image_meta *m, struct field f[9])
{
	const struct field all[9] = {
		{ "name", m->name }, { "version", m->version }, { "description", m->description },
		{ "created", m->created }, { "created-by", m->created_by }, { "source", m->source },
		{ "packer", m->packer }, { "target", m->target }, { "default-env", m->default_env },
	};
	memcpy(f, all, sizeof all);
}

/* What a line's value is shown as: "." for the mount point itself. */
static const char *shown_value(const struct squash_env_line *e)
{
	bool path = e->kind == SQUASH_ENV_SET_PATH || e->kind == SQUASH_ENV_PREPEND_PATH ||
		    e->kind == SQUASH_ENV_APPEND_PATH;

	return path && !e->absolute && !*e->value ? "." : e->value;
}

/* Whether environment i is the first line of its name (lists each once). */
static bool first_of_env(const struct squash_image_meta *m, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (!strcmp(m->env[j].env, m->env[i].env))
			return false;
	return true;
}

/* Below the image's facts (squash-images inspect): a heading, then the
 * metadata indented. */
static void show_text(const struct squash_image_meta *m, FILE *out)
{
	struct field f[9];

	if (!m) {
		fprintf(out, "metadata:    none (the image has no /%s, which squash-pack writes, nor a "
			"uenv /%s)\n", SQUASH_META_PATH, SQUASH_UENV_META_PATH);
		return;
	}
	fprintf(out, "metadata (/%s):\n", m->file);
	fields_of(m, f);
	for (size_t i = 0; i < 9; i++)
		if (f[i].value)
			fprintf(out, "  %s: %s\n", f[i].key, f[i].value);
	for (size_t i = 0; i < m->n_env; i++) {
		if (!first_of_env(m, i))
			continue;
		fprintf(out, "  env %s:\n", m->env[i].env);
		for (size_t j = i; j < m->n_env; j++) {
			const struct squash_env_line *e = &m->env[j];

			if (strcmp(e->env, m->env[i].env))
				continue;
			if (e->kind == SQUASH_ENV_REFUSED)
				fprintf(out, "    (cannot be applied: %s)\n", e->value);
			else if (e->kind == SQUASH_ENV_NOTHING)
				fprintf(out, "    (changes nothing)\n");
			else if (e->kind == SQUASH_ENV_UNSET)
				fprintf(out, "    unset %s\n", e->var);
			else
				fprintf(out, "    %s %s %s\n", op_word(e->kind), e->var,
					e->kind == SQUASH_ENV_SET && !*e->value ? "\"\"" : shown_value(e));
		}
	}
}

/* The value of inspect's "metadata" member: null or an object. */
static void show_json(const struct squash_image_meta *m, FILE *out)
{
	struct field f[9];

	if (!m) {
		fputs("null", out);
		return;
	}
	fprintf(out, "{\"format\": %d, \"file\": ", SQUASH_META_FORMAT);
	json_write_string(out, m->file);
	fields_of(m, f);
	for (size_t i = 0; i < 9; i++) {
		fputs(", ", out);
		json_write_string(out, f[i].key);
		fputs(": ", out);
		if (f[i].value)
			json_write_string(out, f[i].value);
		else
			fputs("null", out);
	}
	fputs(", \"environments\": {", out);
	for (size_t i = 0, shown = 0; i < m->n_env; i++) {
		if (!first_of_env(m, i))
			continue;
		fputs(shown++ ? ", " : "", out);
		json_write_string(out, m->env[i].env);
		fputs(": [", out);
		for (size_t j = i, k = 0; j < m->n_env; j++) {
			if (strcmp(m->env[j].env, m->env[i].env))
				continue;
			fprintf(out, "%s{\"op\": \"%s\", \"var\": ", k++ ? ", " : "", op_word(m->env[j].kind));
			json_write_string(out, m->env[j].var);
			fputs(", \"value\": ", out);
			json_write_string(out, shown_value(&m->env[j]));
			fputc('}', out);
		}
		fputc(']', out);
	}
	fputs("}}", out);
}

/* Runs the reader for inner (at most max bytes) into r (r->out of max + 1
 * bytes). 1 with the text in r, 0 when the image has no such file, -1
 * with err when it cannot be read here, -2 with err when the image or the
 * file is at fault. */
static int cat_meta(const char *arg, const char *image_path, int image_fd, const char *inner, size_t max,
		    struct reader_cat_result *r, char *err, size_t errlen)
{
	char *out = r->out;

	memset(r, 0, sizeof *r);
	r->out = out;
	r->out_max = max;
	if (reader_cat_run(arg, image_fd, inner, r, err, errlen))
		return -1;
	if (r->timed_out) {
		snprintf(err, errlen, "%s: reading its /%s took more than %d s", image_path, inner,
			 SQUASH_READER_CAT_TIMEOUT_S);
		return -1;
	}
	if (r->too_long) {
		snprintf(err, errlen, "%s: /%s is more than the %zu bytes a metadata file may have",
			 image_path, inner, max);
		return -2;
	}
	if (WIFEXITED(r->status) && (WEXITSTATUS(r->status) == 127 || WEXITSTATUS(r->status) == 126)) {
		snprintf(err, errlen, "squash-reader (of slurm-squash) is needed to read an image's metadata: %s",
			 reader_cat_first_line(r->errtext));
		return -1;
	}
	if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == SQUASH_READER_CAT_NO_FILE)
		return 0;
	if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
		snprintf(err, errlen, "%s: cannot read /%s: %s", image_path, inner,
			 reader_cat_first_line(r->errtext));
		/* The image or the file in it is at fault (not a regular file,
		 * damaged), as it is for the jobs that read it. */
		return WIFEXITED(r->status) && (WEXITSTATUS(r->status) == SQUASH_READER_CAT_FAILED ||
						WEXITSTATUS(r->status) == SQUASH_READER_CAT_NOT_REGULAR) ? -2 : -1;
	}
	return 1;
}

int squash_image_meta_read(const char *image_path, int image_fd, struct squash_image_meta *meta,
			   bool *found, char *err, size_t errlen)
{
	struct reader_cat_result r = { 0 };
	char why[512], *arg = NULL;
	int rc = -1;

	*found = false;
	/* A path starting with '-' must not be taken for an option. */
	if (asprintf(&arg, "%s%s", image_path[0] == '/' ? "" : "./", image_path) < 0 ||
	    !(r.out = malloc(SQUASH_UENV_META_MAX_BYTES + 1))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (image_fd < 0 && access(image_path, R_OK) != 0) {
		snprintf(err, errlen, "%s: %s", image_path, strerror(errno));
		goto out;
	}
	rc = cat_meta(arg, image_path, image_fd, SQUASH_META_PATH, SQUASH_META_MAX_BYTES, &r, err, errlen);
	if (rc > 0 && squash_image_meta_parse(r.out, r.out_len, meta, why, sizeof why) != 0) {
		snprintf(err, errlen, "%s: /%s: %s", image_path, SQUASH_META_PATH, why);
		rc = -2;
	} else if (rc == 0) {
		/* A uenv image's; anything else there is no metadata, as in jobs
		 * (image_meta_load.c). */
		rc = cat_meta(arg, image_path, image_fd, SQUASH_UENV_META_PATH, SQUASH_UENV_META_MAX_BYTES, &r,
			      why, sizeof why);
		if (rc == -2)
			rc = 0;
		if (rc > 0)
			rc = squash_image_meta_from_uenv(r.out, r.out_len, meta, why, sizeof why);
		if (rc < 0)
			snprintf(err, errlen, "%s: /%s: %s", image_path, SQUASH_UENV_META_PATH, why);
	}
	if (rc > 0) {
		*found = true;
		rc = 0;
	}
out:
	free(arg);
	free(r.out);
	return rc;
}

int squash_image_meta_show(const char *image_path, bool json, FILE *out, bool *found, char *err,
			   size_t errlen)
{
	struct squash_image_meta meta;

	if (squash_image_meta_read(image_path, -1, &meta, found, err, errlen) < 0)
		return -1;
	if (json)
		show_json(*found ? &meta : NULL, out);
	else
		show_text(*found ? &meta : NULL, out);
	if (*found)
		squash_image_meta_free(&meta);
	return 0;
}

/* Reading an image's /.squash/meta (see image_meta.h). */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "image_meta.h"
#include "utf8_text.h"

#define TARGET_MAX 4095
#define CREATED_BY_MAX 256

/* One line being parsed: its fields are read left to right. */
struct line {
	const char *p, *end;
	unsigned no;
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static void skip_blanks(struct line *l)
{
	while (l->p < l->end && is_blank(*l->p))
		l->p++;
}

/* The next field (a run of non-blank bytes), or a zero-length one at the end. */
static size_t next_field(struct line *l, const char **start)
{
	skip_blanks(l);
	*start = l->p;
	while (l->p < l->end && !is_blank(*l->p))
		l->p++;
	return (size_t)(l->p - *start);
}

/* Text only: printable UTF-8 and tabs. */
static int check_text(const struct line *l, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)l->p, *end = (const unsigned char *)l->end;

	while (p < end) {
		size_t n;

		if (*p == '\0') {
			squash_errf(err, errlen, "line %u: contains a NUL byte (the file must be text)", l->no);
			return -1;
		}
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
			squash_errf(err, errlen, "line %u: contains a control character (\\x%02x)", l->no, *p);
			return -1;
		}
		if (*p < 0x80) {
			p++;
			continue;
		}
		n = squash_utf8_printable(p, (size_t)(end - p));
		if (!n) {
			squash_errf(err, errlen, "line %u: is not UTF-8 text (byte \\x%02x)", l->no, *p);
			return -1;
		}
		p += n;
	}
	return 0;
}

bool squash_meta_text_printable(const char *s, size_t n)
{
	struct line l = { s, s + n, 0 };

	return check_text(&l, NULL, 0) == 0;
}

/* [A-Za-z0-9._+-]{1,64}: names and versions of images. */
bool squash_meta_label_valid(const char *s, size_t n)
{
	if (n == 0 || n > SQUASH_META_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("._+-", s[i])))
			return false;
	return true;
}

static bool env_name_valid_n(const char *s, size_t n)
{
	if (n == 0 || n > SQUASH_META_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool alpha = (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || s[i] == '_';
		if (!alpha && !(i > 0 && s[i] >= '0' && s[i] <= '9'))
			return false;
	}
	return true;
}

bool squash_env_name_valid(const char *name)
{
	return env_name_valid_n(name, strlen(name));
}

bool squash_env_view_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > SQUASH_META_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= 'a' && name[i] <= 'z') ||
		      (name[i] >= '0' && name[i] <= '9') || strchr("_.-", name[i])))
			return false;
	return name[0] != '.' && name[0] != '-';
}

/* YYYY-MM-DDTHH:MM:SSZ */
static bool created_valid(const char *s, size_t n)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";

	if (n != sizeof shape - 1)
		return false;
	for (size_t i = 0; i < n; i++)
		if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i])
			return false;
	return true;
}

bool squash_meta_has_dotdot(const char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		if (s[i] == '.' && s[i + 1] == '.' && (i == 0 || s[i - 1] == '/') &&
		    (i + 2 == n || s[i + 2] == '/'))
			return true;
	return false;
}

char *squash_meta_path_normalised(const char *s, size_t n)
{
	char *copy = malloc(n + 1), *w = copy;

	if (!copy)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && s[j] != '/')
			j++;
		if (!(j - i == 0 || (j - i == 1 && s[i] == '.'))) {
			if (w != copy)
				*w++ = '/';
			memcpy(w, s + i, j - i);
			w += j - i;
		}
		i = j + 1;
	}
	*w = '\0';
	return copy;
}

bool squash_meta_target_valid(const char *s, size_t n)
{
	return n > 0 && n <= TARGET_MAX && s[0] == '/' && !squash_meta_has_dotdot(s, n) && !memchr(s, ':', n) &&
	       !memchr(s, ',', n);
}

/* A RELPATH, normalised (see struct squash_env_line); -1 with err. */
static int relpath_copy(const struct line *l, const char *s, size_t n, char **out, char *err,
			size_t errlen)
{
	if (n == 0) {
		squash_errf(err, errlen, "line %u: a path is missing (\".\" is the mount point)", l->no);
		return -1;
	}
	if (s[0] == '/') {
		squash_errf(err, errlen, "line %u: the path must be relative to the mount point, not start with '/'", l->no);
		return -1;
	}
	if (squash_meta_has_dotdot(s, n)) {
		squash_errf(err, errlen, "line %u: the path may not have a '..' component (it must stay inside the image)", l->no);
		return -1;
	}
	if (memchr(s, ':', n)) {
		squash_errf(err, errlen, "line %u: the path may not contain ':' (the separator of search paths)", l->no);
		return -1;
	}
	if (!(*out = squash_meta_path_normalised(s, n))) {
		squash_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int copy_field(const char *s, size_t n, char **out, char *err, size_t errlen)
{
	*out = strndup(s, n);
	if (!*out) {
		squash_errf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* The rest of the line after the blanks that end the previous field. */
static size_t rest_of_line(struct line *l, const char **start)
{
	skip_blanks(l);
	*start = l->p;
	l->p = l->end;
	return (size_t)(l->end - *start);
}

static int no_more_fields(struct line *l, const char *key, char *err, size_t errlen)
{
	const char *s;

	if (next_field(l, &s) == 0)
		return 0;
	squash_errf(err, errlen, "line %u: %s takes one value; '%.*s' is one too many", l->no,
		    key, (int)(l->end - s > 64 ? 64 : l->end - s), s);
	return -1;
}

static int parse_env(struct line *l, struct squash_image_meta *meta, char *err, size_t errlen)
{
	static const struct {
		const char *word;
		enum squash_env_op_kind kind;
	} ops[] = {
		{ "set", SQUASH_ENV_SET },
		{ "set-path", SQUASH_ENV_SET_PATH },
		{ "prepend-path", SQUASH_ENV_PREPEND_PATH },
		{ "append-path", SQUASH_ENV_APPEND_PATH },
	};
	struct squash_env_line *e;
	const char *name, *op, *var, *value;
	size_t name_n = next_field(l, &name), op_n = next_field(l, &op), var_n = next_field(l, &var);
	size_t k, value_n;

	if (meta->n_env == SQUASH_META_MAX_ENV_LINES) {
		squash_errf(err, errlen, "line %u: more than %d env lines", l->no, SQUASH_META_MAX_ENV_LINES);
		return -1;
	}
	if (!var_n) {
		squash_errf(err, errlen, "line %u: expected 'env ENVNAME set|set-path|prepend-path|append-path VAR VALUE'", l->no);
		return -1;
	}
	if (!env_name_valid_n(name, name_n)) {
		squash_errf(err, errlen, "line %u: '%.*s' is not an environment name ([A-Za-z_][A-Za-z0-9_]*, at most %d)",
			    l->no, (int)(name_n > 80 ? 80 : name_n), name, SQUASH_META_NAME_MAX);
		return -1;
	}
	if (name_n == 4 && !memcmp(name, "none", 4)) {
		squash_errf(err, errlen, "line %u: 'none' cannot name an environment (--squash-env=none means no environment)", l->no);
		return -1;
	}
	for (k = 0; k < sizeof ops / sizeof ops[0]; k++)
		if (strlen(ops[k].word) == op_n && !memcmp(ops[k].word, op, op_n))
			break;
	if (k == sizeof ops / sizeof ops[0]) {
		squash_errf(err, errlen, "line %u: unknown operation '%.*s' (set, set-path, prepend-path or append-path)",
			    l->no, (int)(op_n > 80 ? 80 : op_n), op);
		return -1;
	}
	if (!env_name_valid_n(var, var_n)) {
		squash_errf(err, errlen, "line %u: '%.*s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most %d)",
			    l->no, (int)(var_n > 80 ? 80 : var_n), var, SQUASH_META_NAME_MAX);
		return -1;
	}
	e = &meta->env[meta->n_env];
	e->kind = ops[k].kind;
	e->line = l->no;
	if (e->kind == SQUASH_ENV_SET) {
		value_n = rest_of_line(l, &value);
		if (copy_field(value, value_n, &e->value, err, errlen))
			return -1;
	} else {
		value_n = next_field(l, &value);
		if (relpath_copy(l, value, value_n, &e->value, err, errlen) ||
		    no_more_fields(l, ops[k].word, err, errlen)) {
			free(e->value);
			e->value = NULL;
			return -1;
		}
	}
	if (copy_field(name, name_n, &e->env, err, errlen) || copy_field(var, var_n, &e->var, err, errlen)) {
		free(e->env);
		free(e->var);
		free(e->value);
		memset(e, 0, sizeof *e);
		return -1;
	}
	meta->n_env++;
	return 0;
}

/* The keys with one value: where each is kept and how it is checked. */
enum check { ONE_LABEL, ONE_CREATED, ONE_WORD, ONE_TARGET, ONE_ENVNAME, REST };

static char **field_of(struct squash_image_meta *meta, const char *key, size_t n, enum check *check)
{
	static const struct {
		const char *key;
		size_t offset;
		enum check check;
	} keys[] = {
		{ "name", offsetof(struct squash_image_meta, name), ONE_LABEL },
		{ "version", offsetof(struct squash_image_meta, version), ONE_LABEL },
		{ "description", offsetof(struct squash_image_meta, description), REST },
		{ "created", offsetof(struct squash_image_meta, created), ONE_CREATED },
		{ "created-by", offsetof(struct squash_image_meta, created_by), ONE_WORD },
		{ "source", offsetof(struct squash_image_meta, source), REST },
		{ "packer", offsetof(struct squash_image_meta, packer), REST },
		{ "target", offsetof(struct squash_image_meta, target), ONE_TARGET },
		{ "default-env", offsetof(struct squash_image_meta, default_env), ONE_ENVNAME },
	};

	for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
		if (strlen(keys[k].key) == n && !memcmp(keys[k].key, key, n)) {
			*check = keys[k].check;
			return (char **)((char *)meta + keys[k].offset);
		}
	}
	return NULL;
}

static int parse_value(struct line *l, const char *key, char **field, enum check check, char *err,
		       size_t errlen)
{
	const char *v;
	size_t n = check == REST ? rest_of_line(l, &v) : next_field(l, &v);
	bool ok = n > 0;
	const char *want = "a value";

	switch (check) {
	case ONE_LABEL:
		ok = squash_meta_label_valid(v, n);
		want = "[A-Za-z0-9._+-], 1 to 64 characters";
		break;
	case ONE_CREATED:
		ok = created_valid(v, n);
		want = "a UTC time as YYYY-MM-DDTHH:MM:SSZ";
		break;
	case ONE_WORD:
		ok = n > 0 && n <= CREATED_BY_MAX;
		want = "one word of at most 256 bytes";
		break;
	case ONE_TARGET:
		ok = squash_meta_target_valid(v, n);
		want = "an absolute path without '..', ':' or ','";
		break;
	case ONE_ENVNAME:
		ok = env_name_valid_n(v, n) && !(n == 4 && !memcmp(v, "none", 4));
		want = "an environment name ([A-Za-z_][A-Za-z0-9_]*, at most 64, not 'none')";
		break;
	case REST:
		break;
	}
	if (!ok) {
		squash_errf(err, errlen, "line %u: %s: expected %s, not '%.*s'", l->no, key, want,
			    (int)(n > 80 ? 80 : n), v);
		return -1;
	}
	if (check != REST && no_more_fields(l, key, err, errlen))
		return -1;
	return copy_field(v, n, field, err, errlen);
}

/* One non-blank, non-comment line. */
static int parse_line(struct line *l, bool first, struct squash_image_meta *meta, char *err,
		      size_t errlen)
{
	const char *key, *v;
	size_t key_n = next_field(l, &key), n;
	enum check check;
	char **field;

	if (first) {
		if (!(key_n == 6 && !memcmp(key, "format", 6))) {
			squash_errf(err, errlen, "line %u: the file must start with 'format %d' (is it an image metadata file?)",
				    l->no, SQUASH_META_FORMAT);
			return -1;
		}
		n = next_field(l, &v);
		if (!(n == 1 && v[0] == '0' + SQUASH_META_FORMAT)) {
			squash_errf(err, errlen, "line %u: format '%.*s' is not one this slurm-squash reads (%d)",
				    l->no, (int)(n > 16 ? 16 : n), v, SQUASH_META_FORMAT);
			return -1;
		}
		return no_more_fields(l, "format", err, errlen);
	}
	if (key_n == 3 && !memcmp(key, "env", 3))
		return parse_env(l, meta, err, errlen);
	field = field_of(meta, key, key_n, &check);
	if (!field) {
		squash_errf(err, errlen, "line %u: unknown key '%.*s' (format %d knows format, name, version, description, "
			    "created, created-by, source, packer, target, default-env and env)",
			    l->no, (int)(key_n > 64 ? 64 : key_n), key, SQUASH_META_FORMAT);
		return -1;
	}
	if (*field) {
		squash_errf(err, errlen, "line %u: %.*s is given twice", l->no, (int)key_n, key);
		return -1;
	}
	char keyz[16];
	snprintf(keyz, sizeof keyz, "%.*s", (int)key_n, key);
	return parse_value(l, keyz, field, check, err, errlen);
}

int squash_image_meta_parse(const char *text, size_t len, struct squash_image_meta *meta,
			    char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	bool seen_format = false;
	unsigned no = 0;

	memset(meta, 0, sizeof *meta);
	if (len > SQUASH_META_MAX_BYTES) {
		squash_errf(err, errlen, "%zu bytes, more than the %d a metadata file may have", len,
			    SQUASH_META_MAX_BYTES);
		return -1;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		struct line l = { p, nl ? nl : end, ++no };

		p = nl ? nl + 1 : end;
		if (l.end - l.p > SQUASH_META_MAX_LINE) {
			squash_errf(err, errlen, "line %u: longer than %d bytes", no, SQUASH_META_MAX_LINE);
			goto fail;
		}
		if (check_text(&l, err, errlen))
			goto fail;
		skip_blanks(&l);
		if (l.p == l.end || *l.p == '#')
			continue;
		if (parse_line(&l, !seen_format, meta, err, errlen))
			goto fail;
		seen_format = true;
	}
	if (!seen_format) {
		squash_errf(err, errlen, "empty: no 'format %d' line", SQUASH_META_FORMAT);
		goto fail;
	}
	if (meta->default_env && !squash_image_meta_has_env(meta, meta->default_env)) {
		squash_errf(err, errlen, "default-env %s: no env %s line defines it", meta->default_env,
			    meta->default_env);
		goto fail;
	}
	meta->file = SQUASH_META_PATH;
	return 0;
fail:
	squash_image_meta_free(meta);
	return -1;
}

void squash_image_meta_free(struct squash_image_meta *meta)
{
	char **fields[] = { &meta->name, &meta->version, &meta->description, &meta->created,
			    &meta->created_by, &meta->source, &meta->packer, &meta->target,
			    &meta->default_env };

	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		free(*fields[i]);
		*fields[i] = NULL;
	}
	for (size_t i = 0; i < meta->n_env; i++) {
		free(meta->env[i].env);
		free(meta->env[i].var);
		free(meta->env[i].value);
	}
	meta->n_env = 0;
}

bool squash_image_meta_has_env(const struct squash_image_meta *meta, const char *name)
{
	for (size_t i = 0; i < meta->n_env; i++)
		if (!strcmp(meta->env[i].env, name))
			return true;
	return false;
}

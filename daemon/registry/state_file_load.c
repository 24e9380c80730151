/* Reading the registry back (state_file.h): the known records, and those
 * of a newer squashd of the same format kept with their entry. */
#include "config.h"
#include "registry/state_file.h"

#include "registry/state_file_records.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_MAGIC_WORD "squashd-state"
#define STATE_LINE_MAX (4 * 3 * SQUASH_PATH_MAX)
/* Fields split per record: more than any record of this version has; the
 * rest of a longer line is ignored like any field this version does not
 * know. */
#define STATE_FIELDS_MAX 32

/* Splits line into at most max space-separated fields (those beyond are
 * fields of a newer version: ignored). */
static int split(char *line, char **fields, int max)
{
	int n = 0;
	for (char *save = NULL, *tok = strtok_r(line, " \n", &save); tok && n < max;
	     tok = strtok_r(NULL, " \n", &save))
		fields[n++] = tok;
	return n;
}

/* The first line: "squashd-state FORMAT", where a later compatible
 * revision of the same format may add ".REVISION" or " ANYTHING" (not
 * written so far). Returns 0 when this squashd reads it, -1 when it is no
 * state file, -2 (with *format) when it is another format version. */
static int check_magic(const char *line, unsigned *format)
{
	size_t w = strlen(STATE_MAGIC_WORD);
	char *end;

	if (strncmp(line, STATE_MAGIC_WORD " ", w + 1) || line[w + 1] < '0' || line[w + 1] > '9')
		return -1;
	errno = 0;
	unsigned long v = strtoul(line + w + 1, &end, 10);
	if (errno || v > 65535 || (*end != '\n' && *end != '.' && *end != ' '))
		return -1;
	*format = (unsigned)v;
	return v == STATE_FILE_FORMAT ? 0 : -2;
}

/* A record kind this squashd does not know: a name ([a-z][a-z0-9_]*) and
 * printable fields, as every version writes them. */
static bool unknown_record_ok(const char *line)
{
	size_t k = 0;

	if (line[0] < 'a' || line[0] > 'z')
		return false;
	while ((line[k] >= 'a' && line[k] <= 'z') || (line[k] >= '0' && line[k] <= '9') || line[k] == '_')
		k++;
	if (line[k] != ' ' && line[k] != '\n')
		return false;
	for (; line[k] != '\n'; k++)
		if ((unsigned char)line[k] < ' ' || (unsigned char)line[k] > '~')
			return false;
	return line[k + 1] == '\0';
}

/* Appends line to *extra (records kept for the next save). */
static int keep_record(char **extra, const char *line)
{
	size_t old = *extra ? strlen(*extra) : 0, add = strlen(line);
	char *grown = realloc(*extra, old + add + 1);

	if (!grown)
		return -1;
	memcpy(grown + old, line, add + 1);
	*extra = grown;
	return 0;
}

static bool kind_is(const char *line, const char *kind)
{
	size_t n = strlen(kind);
	return !strncmp(line, kind, n) && (line[n] == ' ' || line[n] == '\n');
}

/* Reads the rest of a line longer than STATE_LINE_MAX. */
static void skip_rest_of_line(FILE *f)
{
	int c;

	while ((c = getc(f)) != EOF && c != '\n')
		;
}

/* The entry whose records are being read (state_file.h: a bad record
 * drops it whole). */
struct reading {
	struct registry *r;
	void *entry;        /* the mount, job or scope read last; NULL: none (the file's) */
	char kind;          /* 'm', 'j', 's' */
	bool dropping;      /* its records are skipped: it was dropped */
	unsigned bad, first_bad_line;
	const char *first_bad_why;
};

static void drop_entry(struct reading *rd, unsigned lineno, const char *why)
{
	if (rd->entry && rd->kind == 'm')
		registry_remove_mount(rd->r, rd->entry);
	else if (rd->entry && rd->kind == 'j')
		registry_remove_job(rd->r, rd->entry);
	else if (rd->entry && rd->kind == 's')
		registry_remove_scoped(rd->r, rd->entry);
	rd->entry = NULL;
	rd->dropping = true;
	if (rd->bad++ == 0) {
		rd->first_bad_line = lineno;
		rd->first_bad_why = why;
	}
}

/* One known record; 0, or -1 when it is bad. An entry's first record
 * makes it the current entry (its unknown records go with it). */
static int read_record(struct reading *rd, char **fv, int n, char ***extra)
{
	struct registry *r = rd->r;
	const char *kind = fv[0];
	int rc;

	if (!strcmp(kind, "next"))
		return (n >= 2 && sscanf(fv[1], "%u", &r->next_mount_id) == 1) ? 0 : -1;
	bool opens = !strcmp(kind, "mount") || !strcmp(kind, "merged") || !strcmp(kind, "job") ||
		     !strcmp(kind, "scope");
	if (opens) {
		/* A new entry: the one before it is complete. A parser that
		 * added its entry and then failed leaves it at the head. */
		void *before = !strcmp(kind, "job") ? (void *)r->jobs : !strcmp(kind, "scope") ? (void *)r->scoped : (void *)r->mounts;
		rd->entry = NULL;
		rd->dropping = false;
		rd->kind = kind[0]; /* 'm'ount or 'm'erged, 'j'ob, 's'cope */
		rc = rd->kind == 'j' ? parse_job(r, fv, n) : rd->kind == 's' ? parse_scope(r, fv, n) :
		     !strcmp(kind, "mount") ? parse_mount(r, fv, n) : parse_merged(r, fv, n);
		void *head = rd->kind == 'j' ? (void *)r->jobs : rd->kind == 's' ? (void *)r->scoped : (void *)r->mounts;
		if (head != before)
			rd->entry = head; /* dropped with it when rc < 0 */
		if (rc == 0)
			*extra = rd->kind == 'j' ? &r->jobs->state_extra : rd->kind == 's' ? &r->scoped->state_extra :
				 &r->mounts->state_extra;
		return rc;
	}
	if (rd->dropping)
		return 0; /* the rest of a dropped entry */
	if (!strcmp(kind, "part"))
		return rd->kind == 'm' && rd->entry == r->mounts ? parse_part(r, fv, n) : -1;
	if (!strcmp(kind, "linger"))
		return parse_linger(r, fv, n);
	if (!strcmp(kind, "overlay"))
		return parse_overlay(r, fv, n);
	if (!strcmp(kind, "upper"))
		return parse_upper(r, fv, n);
	if (!strcmp(kind, "endwatch"))
		return parse_endwatch(r, fv, n);
	if (!strcmp(kind, "image"))
		return parse_image(r, fv, n);
	if (!strcmp(kind, "simage"))
		return rd->kind == 's' && rd->entry == r->scoped ? parse_scoped_image(r, fv, n) : -1;
	return -1;
}

int state_file_load(struct registry *r, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	char *line = malloc(STATE_LINE_MAX);
	if (!line) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	unsigned lineno = 0, format = 0;
	int rc = 0;
	struct reading rd = { .r = r };
	/* Where a record of an unknown kind goes: the entry whose record
	 * came last before it (mount, job or scope), else the file. */
	char **extra = &r->state_extra;
	while (rc == 0 && fgets(line, STATE_LINE_MAX, f)) {
		lineno++;
		size_t len = strlen(line);
		if (lineno == 1) {
			rc = len && line[len - 1] == '\n' ? check_magic(line, &format) : -1;
			continue;
		}
		if (len == 0 || line[len - 1] != '\n') {
			if (!feof(f))
				skip_rest_of_line(f);
			drop_entry(&rd, lineno, "record cut short (or longer than any record)");
			continue;
		}
		static const char *const known[] = {
			"next", "mount", "linger", "overlay", "upper", "job", "endwatch", "image", "scope", "simage",
			"merged", "part",
		};
		bool is_known = false;
		for (size_t k = 0; k < sizeof(known) / sizeof(known[0]) && !is_known; k++)
			is_known = kind_is(line, known[k]);
		if (!is_known) {
			/* A newer squashd's record: kept with its entry. */
			if (rd.dropping)
				continue;
			if (!unknown_record_ok(line) || keep_record(extra, line) < 0)
				drop_entry(&rd, lineno, "malformed record");
			continue;
		}
		char *fv[STATE_FIELDS_MAX];
		int n = split(line, fv, STATE_FIELDS_MAX);
		if (n <= 0 || read_record(&rd, fv, n, &extra) < 0)
			drop_entry(&rd, lineno, "malformed record");
		if (rd.dropping)
			extra = &r->state_extra; /* (unknown records are skipped meanwhile) */
	}
	bool read_error = ferror(f);
	free(line);
	fclose(f);
	if (rc == -2) {
		snprintf(err, errlen, "%s is in state file format %u, written by a %s squashd; this one reads format %d",
			 path, format, format > STATE_FILE_FORMAT ? "newer" : "other", STATE_FILE_FORMAT);
		registry_free(r);
		return -2;
	}
	if (rc < 0 || read_error) {
		if (read_error)
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		else
			snprintf(err, errlen, "%s:1: not a squashd state file", path);
		registry_free(r);
		return -1;
	}
	/* Mount ids must stay unique after adoption. */
	for (struct mount_entry *m = r->mounts; m; m = m->next)
		if (m->id > r->next_mount_id)
			r->next_mount_id = m->id;
	if (rd.bad) {
		snprintf(err, errlen, "%s:%u: %s (%u bad record%s: the entries they belong to were dropped, "
			 "the others kept)", path, rd.first_bad_line, rd.first_bad_why, rd.bad, rd.bad == 1 ? "" : "s");
		return 1;
	}
	return 0;
}

int state_file_probe_format(const char *path, unsigned *format)
{
	char line[128];
	FILE *f = fopen(path, "re");
	int rc = -1;

	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f) && strchr(line, '\n'))
		rc = check_magic(line, format);
	fclose(f);
	return rc;
}

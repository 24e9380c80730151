/* Reading the registry back (state_file.h): the known records, and those
 * of a newer squashd of the same format kept with their entry. */
#include "config.h"
#include "registry/state_file.h"

#include "clock.h"
#include "registry/linger.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STATE_MAGIC_WORD "squashd-state"
#define STATE_LINE_MAX (4 * 3 * SQUASH_PATH_MAX)
/* Fields split per record: more than any record of this version has; the
 * rest of a longer line is ignored like any field this version does not
 * know. */
#define STATE_FIELDS_MAX 32

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes in place; returns NULL on a malformed escape. */
static char *decode_field(char *s)
{
	if (!strcmp(s, "-")) {
		s[0] = '\0';
		return s;
	}
	char *out = s;
	for (char *p = s; *p; p++) {
		if (*p == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return NULL;
			*out++ = (char)(hi * 16 + lo);
			p += 2;
		} else {
			*out++ = *p;
		}
	}
	*out = '\0';
	return s;
}

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

static int parse_mount(struct registry *r, char **fv, int n)
{
	if (n < 13)
		return -1;
	struct mount_key key = {0};
	unsigned id;
	int mode, pid;
	uintmax_t dev, ino;
	intmax_t size, owner;
	long nsec;
	int64_t sec;
	if (sscanf(fv[1], "%u", &id) != 1 || sscanf(fv[2], "%d", &mode) != 1 ||
	    sscanf(fv[3], "%ju", &dev) != 1 || sscanf(fv[4], "%ju", &ino) != 1 ||
	    sscanf(fv[5], "%jd", &size) != 1 || sscanf(fv[6], "%" SCNd64, &sec) != 1 ||
	    sscanf(fv[7], "%ld", &nsec) != 1 || sscanf(fv[8], "%jd", &owner) != 1 ||
	    sscanf(fv[9], "%d", &pid) != 1)
		return -1;
	char *loop = decode_field(fv[10]), *mp = decode_field(fv[11]), *image = decode_field(fv[12]);
	if (!loop || !mp || !image || !*mp || !*image || strlen(loop) >= sizeof(((struct mount_entry *)0)->loop_device))
		return -1;
	if (mode != SQUASH__MOUNT_MODE__FUSE && mode != SQUASH__MOUNT_MODE__KERNEL)
		return -1;
	key.dev = (dev_t)dev;
	key.ino = (ino_t)ino;
	key.size = (off_t)size;
	key.mtime_sec = sec;
	key.mtime_nsec = nsec;
	key.mode = (Squash__MountMode)mode;
	key.owner_uid = owner < 0 ? MOUNT_OWNER_ANY : (uid_t)owner;
	unsigned next = r->next_mount_id; /* (the file's id, not a new one) */
	struct mount_entry *m = registry_add_mount(r, &key, image, mp);
	r->next_mount_id = next;
	if (!m)
		return -1;
	m->id = id;
	m->server_pid = pid > 0 ? pid : 0;
	snprintf(m->loop_device, sizeof(m->loop_device), "%s", loop);
	return 0;
}

/* "linger MOUNTID EXPIRY": the mount before it lingers until EXPIRY
 * (seconds since the epoch). */
/* "merged ID MOUNTPOINT IMAGE LOWERID,...": a merged mount of the mounts
 * read before it ("-": none left). */
static int parse_merged(struct registry *r, char **fv, int n)
{
	unsigned id;
	if (n != 5 || sscanf(fv[1], "%u", &id) != 1 || id == 0 || registry_mount_by_id(r, id))
		return -1;
	char *mp = decode_field(fv[2]), *image = decode_field(fv[3]);
	if (!mp || !image || !*mp || !*image)
		return -1;
	size_t count = 0, cap = 1;
	for (const char *p = fv[4]; *p; p++)
		cap += *p == ',';
	if (cap > SQUASH_MAX_IMAGES)
		return -1;
	struct mount_entry **lowers = malloc(cap * sizeof(*lowers));
	if (!lowers)
		return -1;
	for (char *save = NULL, *tok = strcmp(fv[4], "-") ? strtok_r(fv[4], ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned lid;
		char extra;
		struct mount_entry *l = sscanf(tok, "%u%c", &lid, &extra) == 1 ? registry_mount_by_id(r, lid) : NULL;
		if (!l || l->key.mode == MOUNT_MODE_MERGED || count == cap) {
			free(lowers);
			return -1;
		}
		lowers[count++] = l;
	}
	struct mount_key key = { .mode = MOUNT_MODE_MERGED, .owner_uid = MOUNT_OWNER_ANY };
	unsigned next = r->next_mount_id;
	struct mount_entry *m = registry_add_mount(r, &key, image, mp);
	r->next_mount_id = next;
	int rc = m ? registry_set_lowers(m, lowers, count) : -1;
	free(lowers);
	if (m)
		m->id = id;
	return rc;
}

/* "part ID DEV INO SIZE SEC NSEC": the next image of union mount ID, read
 * just before (its images follow its mount record, bottom first). */
static int parse_part(struct registry *r, char **fv, int n)
{
	unsigned id;
	uintmax_t dev, ino;
	intmax_t size;
	int64_t sec;
	long nsec;
	struct mount_entry *m = r->mounts;

	if (n < 7 || sscanf(fv[1], "%u", &id) != 1 || sscanf(fv[2], "%ju", &dev) != 1 ||
	    sscanf(fv[3], "%ju", &ino) != 1 || sscanf(fv[4], "%jd", &size) != 1 ||
	    sscanf(fv[5], "%" SCNd64, &sec) != 1 || sscanf(fv[6], "%ld", &nsec) != 1)
		return -1;
	/* Only the mount just read, a FUSE one, and no more images than a
	 * union may have. */
	if (!m || m->id != id || m->key.mode != SQUASH__MOUNT_MODE__FUSE ||
	    m->key.owner_uid == MOUNT_OWNER_ANY || m->n_parts >= SQUASH_MAX_IMAGES)
		return -1;
	struct mount_key *grown = realloc(m->parts, (m->n_parts + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	grown[m->n_parts++] = (struct mount_key){
		.dev = (dev_t)dev, .ino = (ino_t)ino, .size = (off_t)size, .mtime_sec = sec,
		.mtime_nsec = nsec, .mode = m->key.mode, .owner_uid = m->key.owner_uid,
	};
	m->parts = grown;
	return 0;
}

static int parse_linger(struct registry *r, char **fv, int n)
{
	unsigned id;
	intmax_t expiry;
	if (n < 3 || sscanf(fv[1], "%u", &id) != 1 || sscanf(fv[2], "%jd", &expiry) != 1)
		return -1;
	struct mount_entry *m = registry_mount_by_id(r, id);
	if (!m || m->state != MOUNT_READY)
		return -1;
	linger_restore(m, (time_t)expiry, squash_now_ms(), time(NULL));
	return 0;
}

/* "overlay JOBID DIR MASK": the job's overlays (after its images). */
static int parse_overlay(struct registry *r, char **fv, int n)
{
	unsigned job_id, mask;
	if (n < 4 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[3], "%x", &mask) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	char *dir = decode_field(fv[2]);
	if (!j || !dir)
		return -1;
	return registry_overlay_restore(j, dir, mask);
}

/* "upper JOBID INDEX DIR": that overlay keeps its changes in DIR. */
static int parse_upper(struct registry *r, char **fv, int n)
{
	unsigned job_id, index;
	if (n < 4 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &index) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	char *dir = decode_field(fv[3]);
	if (!j || !dir || !*dir || index >= j->count || !j->images[index].overlay ||
	    j->images[index].upper)
		return -1;
	return (j->images[index].upper = strdup(dir)) ? 0 : -1;
}

/* "endwatch JOBID": the job is released when its extern step ends. */
static int parse_endwatch(struct registry *r, char **fv, int n)
{
	unsigned job_id;
	if (n < 2 || sscanf(fv[1], "%u", &job_id) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	if (!j)
		return -1;
	j->ends_with_extern = true;
	return 0;
}

static int parse_job(struct registry *r, char **fv, int n)
{
	unsigned job_id, uid;
	int status;
	if (n < 5 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &uid) != 1 ||
	    sscanf(fv[3], "%d", &status) != 1 || registry_find_job(r, job_id))
		return -1;
	char *message = decode_field(fv[4]);
	struct job_entry *j = message ? registry_add_job(r, job_id, uid) : NULL;
	if (!j)
		return -1;
	if (status != SQUASH__STATUS__OK && registry_job_set_failure(j, (Squash__Status)status, message) < 0)
		return -1;
	return 0;
}

static int parse_image(struct registry *r, char **fv, int n)
{
	unsigned job_id, mount_id;
	if (n < 5 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &mount_id) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	struct mount_entry *m = mount_id ? registry_mount_by_id(r, mount_id) : NULL;
	char *image = decode_field(fv[3]), *target = decode_field(fv[4]);
	if (!j || !image || !target || registry_job_add_image(j, image, target, m) < 0)
		return -1;
	/* A mount the file named but that was dropped: the job lost it, as
	 * when a mount vanishes while squashd is down (core/adopt.c). */
	if (mount_id && !m)
		return registry_job_set_failure(j, SQUASH__STATUS__NODE_ERROR,
						"a mount of this job could not be read back from squashd's registry");
	return 0;
}

static int parse_scope(struct registry *r, char **fv, int n)
{
	unsigned job_id, step_id, uid;
	int kind, pid, status;
	unsigned long long start;
	if (n < 9 || sscanf(fv[1], "%d", &kind) != 1 || sscanf(fv[2], "%u", &job_id) != 1 ||
	    sscanf(fv[3], "%u", &step_id) != 1 || sscanf(fv[4], "%d", &pid) != 1 ||
	    sscanf(fv[5], "%llu", &start) != 1 || sscanf(fv[6], "%u", &uid) != 1 ||
	    sscanf(fv[7], "%d", &status) != 1)
		return -1;
	if ((kind != HOLDER_STEP && kind != HOLDER_SESSION) || (kind == HOLDER_SESSION && pid <= 0))
		return -1;
	char *message = decode_field(fv[8]);
	struct job_entry *e = message ? registry_add_scoped(r, (enum holder_kind)kind, job_id, step_id, uid) : NULL;
	if (!e)
		return -1;
	e->session_pid = pid;
	e->session_start = start;
	if (status != SQUASH__STATUS__OK && registry_job_set_failure(e, (Squash__Status)status, message) < 0)
		return -1;
	return 0;
}

/* An image of the scope read last (registry_add_scoped puts it first). */
static int parse_scoped_image(struct registry *r, char **fv, int n)
{
	unsigned mount_id;
	if (n < 4 || !r->scoped || sscanf(fv[1], "%u", &mount_id) != 1)
		return -1;
	struct mount_entry *m = mount_id ? registry_mount_by_id(r, mount_id) : NULL;
	char *image = decode_field(fv[2]), *target = decode_field(fv[3]);
	if (!image || !target)
		return -1; /* (a dropped mount: lost, as in parse_image) */
	return registry_job_add_image(r->scoped, image, target, m);
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

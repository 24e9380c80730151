#include "config.h"
#include "registry/state_file.h"

#include "clock.h"
#include "registry/linger.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STATE_MAGIC "squashd-state 1"
#define STATE_LINE_MAX (4 * 3 * SQUASH_PATH_MAX)

/* Percent-encodes everything but printable non-space ASCII, so a field never
 * contains a space or newline. "-" stands for an empty/absent string. */
static void put_field(FILE *f, const char *s)
{
	if (!s || !*s) {
		fputs(" -", f);
		return;
	}
	fputc(' ', f);
	/* Runs of plain characters in one write: a save under a burst of job
	 * starts writes every job's paths, and a locked fputc per byte was
	 * the largest user-space cost in squashd's profile of such a burst. */
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = 0;

		while (p[n] > ' ' && p[n] < 0x7f && p[n] != '%')
			n++;
		fwrite(p, 1, n, f);
		p += n;
		if (*p)
			fprintf(f, "%%%02X", *p++);
	}
}

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

int state_file_format(const struct registry *r, char **text, size_t *len)
{
	FILE *f = open_memstream(text, len);

	if (!f)
		return -1;
	fprintf(f, "%s\nnext %u\n", STATE_MAGIC, r->next_mount_id);
	/* Only finished mounts: a restarted squashd finds anything half-made
	 * as an unknown leftover and removes it. */
	for (const struct mount_entry *m = r->mounts; m; m = m->next) {
		if ((m->state != MOUNT_READY && m->state != MOUNT_LINGERING) || m->key.mode == MOUNT_MODE_MERGED)
			continue;
		fprintf(f, "mount %u %d %ju %ju %jd %" PRId64 " %ld %jd %d",
			m->id, (int)m->key.mode, (uintmax_t)m->key.dev, (uintmax_t)m->key.ino,
			(intmax_t)m->key.size, m->key.mtime_sec, m->key.mtime_nsec,
			m->key.owner_uid == MOUNT_OWNER_ANY ? (intmax_t)-1 : (intmax_t)m->key.owner_uid,
			(int)m->server_pid);
		put_field(f, m->loop_device);
		put_field(f, m->mount_point);
		put_field(f, m->image);
		fputc('\n', f);
		if (m->state == MOUNT_LINGERING)
			fprintf(f, "linger %u %jd\n", m->id, (intmax_t)linger_expiry_wall(m, squash_now_ms(), time(NULL)));
	}
	/* Merged mounts, after the mounts they stack: "merged ID MOUNTPOINT
	 * IMAGE LOWERID,..." (bottom first; core/merge.h). Who merges them is
	 * not recorded: a holder's images at one target. */
	for (const struct mount_entry *m = r->mounts; m; m = m->next) {
		if ((m->state != MOUNT_READY && m->state != MOUNT_LINGERING) || m->key.mode != MOUNT_MODE_MERGED)
			continue;
		fprintf(f, "merged %u", m->id);
		put_field(f, m->mount_point);
		put_field(f, m->image);
		fputc(' ', f);
		bool any = false;
		for (size_t i = 0; i < m->n_lowers; i++)
			if (m->lowers[i]) {
				fprintf(f, "%s%u", any ? "," : "", m->lowers[i]->id);
				any = true;
			}
		fputs(any ? "\n" : "-\n", f);
		if (m->state == MOUNT_LINGERING)
			fprintf(f, "linger %u %jd\n", m->id, (intmax_t)linger_expiry_wall(m, squash_now_ms(), time(NULL)));
	}
	for (const struct job_entry *j = r->jobs; j; j = j->next) {
		if (j->pending && !j->settling)
			continue; /* its prolog retries against the new squashd */
		fprintf(f, "job %u %u %d", j->job_id, (unsigned)j->uid, (int)j->status);
		put_field(f, j->message);
		fputc('\n', f);
		if (j->ends_with_extern)
			fprintf(f, "endwatch %u\n", j->job_id);
		for (size_t i = 0; i < j->count; i++) {
			const struct mount_entry *m = j->images[i].mount;

			fprintf(f, "image %u %u", j->job_id, m && m->state == MOUNT_READY ? m->id : 0);
			put_field(f, j->images[i].image);
			put_field(f, j->images[i].target);
			fputc('\n', f);
		}
		if (j->overlay_dir) {
			fprintf(f, "overlay %u", j->job_id);
			put_field(f, j->overlay_dir);
			fprintf(f, " %x\n", registry_overlay_mask(j));
			for (size_t i = 0; i < j->count; i++) {
				if (!j->images[i].upper || !j->images[i].overlay)
					continue;
				fprintf(f, "upper %u %zu", j->job_id, i);
				put_field(f, j->images[i].upper);
				fputc('\n', f);
			}
		}
	}
	/* Steps' and sessions' own images: "scope" then its "simage" lines. */
	for (const struct job_entry *e = r->scoped; e; e = e->next) {
		if (e->pending)
			continue;
		fprintf(f, "scope %d %u %u %d %llu %u %d", (int)e->kind, e->job_id, e->step_id,
			(int)e->session_pid, e->session_start, (unsigned)e->uid, (int)e->status);
		put_field(f, e->message);
		fputc('\n', f);
		for (size_t i = 0; i < e->count; i++) {
			const struct mount_entry *m = e->images[i].mount;

			fprintf(f, "simage %u", m && m->state == MOUNT_READY ? m->id : 0);
			put_field(f, e->images[i].image);
			put_field(f, e->images[i].target);
			fputc('\n', f);
		}
	}
	if (fclose(f) != 0) {
		free(*text);
		*text = NULL;
		return -1;
	}
	return 0;
}

int state_file_write(const char *path, const char *text, size_t len, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "state file path too long");
		return -1;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
		return -1;
	}
	int failed = 0;
	for (size_t done = 0; !failed && done < len;) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ENOSPC;
			failed = 1;
		} else {
			done += (size_t)n;
		}
	}
	failed = failed || fsync(fd) != 0;
	int saved = errno;
	failed |= close(fd) != 0;
	if (failed)
		errno = saved;
	if (failed || rename(tmp, path) < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int state_file_save(const struct registry *r, const char *path, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;

	if (state_file_format(r, &text, &len) < 0) {
		snprintf(err, errlen, "cannot write %s: out of memory", path);
		return -1;
	}
	int rc = state_file_write(path, text, len, err, errlen);
	free(text);
	return rc;
}

/* Splits line into at most max space-separated fields. */
static int split(char *line, char **fields, int max)
{
	int n = 0;
	for (char *save = NULL, *tok = strtok_r(line, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save)) {
		if (n == max)
			return -1;
		fields[n++] = tok;
	}
	return n;
}

static int parse_mount(struct registry *r, char **fv, int n)
{
	if (n != 13)
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
	struct mount_entry *m = registry_add_mount(r, &key, image, mp);
	if (!m)
		return -1;
	m->id = id;
	m->server_pid = pid > 0 ? pid : 0;
	snprintf(m->loop_device, sizeof(m->loop_device), "%s", loop);
	return 0;
}

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
	struct mount_entry *m = registry_add_mount(r, &key, image, mp);
	int rc = m ? registry_set_lowers(m, lowers, count) : -1;
	free(lowers);
	if (m)
		m->id = id;
	return rc;
}

/* "linger MOUNTID EXPIRY": the mount before it lingers until EXPIRY
 * (seconds since the epoch). */
static int parse_linger(struct registry *r, char **fv, int n)
{
	unsigned id;
	intmax_t expiry;
	if (n != 3 || sscanf(fv[1], "%u", &id) != 1 || sscanf(fv[2], "%jd", &expiry) != 1)
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
	if (n != 4 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[3], "%x", &mask) != 1)
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
	if (n != 4 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &index) != 1)
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
	if (n != 2 || sscanf(fv[1], "%u", &job_id) != 1)
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
	if (n != 5 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &uid) != 1 ||
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
	if (n != 5 || sscanf(fv[1], "%u", &job_id) != 1 || sscanf(fv[2], "%u", &mount_id) != 1)
		return -1;
	struct job_entry *j = registry_find_job(r, job_id);
	struct mount_entry *m = mount_id ? registry_mount_by_id(r, mount_id) : NULL;
	char *image = decode_field(fv[3]), *target = decode_field(fv[4]);
	if (!j || (mount_id && !m) || !image || !target)
		return -1;
	return registry_job_add_image(j, image, target, m);
}

static int parse_scope(struct registry *r, char **fv, int n)
{
	unsigned job_id, step_id, uid;
	int kind, pid, status;
	unsigned long long start;
	if (n != 9 || sscanf(fv[1], "%d", &kind) != 1 || sscanf(fv[2], "%u", &job_id) != 1 ||
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
	if (n != 4 || !r->scoped || sscanf(fv[1], "%u", &mount_id) != 1)
		return -1;
	struct mount_entry *m = mount_id ? registry_mount_by_id(r, mount_id) : NULL;
	char *image = decode_field(fv[2]), *target = decode_field(fv[3]);
	if ((mount_id && !m) || !image || !target)
		return -1;
	return registry_job_add_image(r->scoped, image, target, m);
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
	unsigned lineno = 0;
	int rc = 0;
	while (rc == 0 && fgets(line, STATE_LINE_MAX, f)) {
		lineno++;
		if (lineno == 1) {
			if (strcmp(line, STATE_MAGIC "\n"))
				rc = -1;
			continue;
		}
		char *fv[16];
		int n = split(line, fv, 16);
		if (n <= 0)
			rc = -1;
		else if (!strcmp(fv[0], "next"))
			rc = (n == 2 && sscanf(fv[1], "%u", &r->next_mount_id) == 1) ? 0 : -1;
		else if (!strcmp(fv[0], "mount"))
			rc = parse_mount(r, fv, n);
		else if (!strcmp(fv[0], "merged"))
			rc = parse_merged(r, fv, n);
		else if (!strcmp(fv[0], "linger"))
			rc = parse_linger(r, fv, n);
		else if (!strcmp(fv[0], "overlay"))
			rc = parse_overlay(r, fv, n);
		else if (!strcmp(fv[0], "upper"))
			rc = parse_upper(r, fv, n);
		else if (!strcmp(fv[0], "job"))
			rc = parse_job(r, fv, n);
		else if (!strcmp(fv[0], "endwatch"))
			rc = parse_endwatch(r, fv, n);
		else if (!strcmp(fv[0], "image"))
			rc = parse_image(r, fv, n);
		else if (!strcmp(fv[0], "scope"))
			rc = parse_scope(r, fv, n);
		else if (!strcmp(fv[0], "simage"))
			rc = parse_scoped_image(r, fv, n);
		else
			rc = -1;
	}
	free(line);
	fclose(f);
	if (rc < 0) {
		snprintf(err, errlen, "%s:%u: malformed record; starting with an empty registry", path, lineno);
		registry_free(r);
		return -1;
	}
	/* Mount ids must stay unique after adoption. */
	for (struct mount_entry *m = r->mounts; m; m = m->next)
		if (m->id > r->next_mount_id)
			r->next_mount_id = m->id;
	return 0;
}

/* Writing the registry (state_file.h); reading it back: state_file_load.c. */
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

#define STATE_MAGIC_WORD "squashd-state"
#define STR(x) #x
#define XSTR(x) STR(x)
#define STATE_MAGIC STATE_MAGIC_WORD " " XSTR(STATE_FILE_FORMAT)

bool state_file_keeps_mount(const struct mount_entry *m)
{
	return m && (m->state == MOUNT_READY || m->state == MOUNT_LINGERING);
}

bool state_file_keeps_entry(const struct job_entry *e)
{
	/* A pending entry's request is retried against the new squashd,
	 * unless its mounts are made (settling: its answer waits for the
	 * save). */
	return !e->pending || e->settling;
}

/* Percent-encodes everything but printable non-space ASCII, so a field never
 * contains a space or newline. "-" stands for an empty/absent string (a
 * string that is just "-" is written "%2D"). Each byte becomes at most
 * three (STATE_FILE_ESCAPE_MAX). */
static void put_field(FILE *f, const char *s)
{
	if (!s || !*s) {
		fputs(" -", f);
		return;
	}
	if (!strcmp(s, "-")) {
		fputs(" %2D", f);
		return;
	}
	static const char hex[] = "0123456789ABCDEF";
	char out[512];
	size_t n = 0;

	fputc(' ', f);
	/* Escaped into a buffer written in pieces: a save under a burst of job
	 * starts writes every job's paths, and a locked fputc per byte was the
	 * largest user-space cost in squashd's profile of such a burst; a
	 * user's paths of spaces and '%' made an fprintf per byte of them. */
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p > ' ' && *p < 0x7f && *p != '%') {
			out[n++] = (char)*p;
		} else {
			out[n++] = '%';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
		if (n > sizeof(out) - STATE_FILE_ESCAPE_MAX) {
			fwrite(out, 1, n, f);
			n = 0;
		}
	}
	fwrite(out, 1, n, f);
}

/* Records a newer squashd wrote that this one does not know, written back
 * as they were read, after the known records of the same entry. */
static void put_extra(FILE *f, const char *extra)
{
	if (extra)
		fputs(extra, f);
}

/* Image i's record of e: "image JOB MOUNT IMAGE TARGET" of a job,
 * "simage MOUNT IMAGE TARGET" of a step or session. */
static void put_image(FILE *f, const struct job_entry *e, size_t i)
{
	const struct mount_entry *m = e->images[i].mount;
	unsigned id = state_file_keeps_mount(m) ? m->id : 0;

	if (e->kind == HOLDER_JOB)
		fprintf(f, "image %u %u", e->job_id, id);
	else
		fprintf(f, "simage %u", id);
	put_field(f, e->images[i].image);
	put_field(f, e->images[i].target);
	fputc('\n', f);
}

static void put_job(FILE *f, const struct job_entry *j)
{
	fprintf(f, "job %u %u %d", j->job_id, (unsigned)j->uid, (int)j->status);
	put_field(f, j->message);
	fputc('\n', f);
	if (j->ends_with_extern)
		fprintf(f, "endwatch %u\n", j->job_id);
	for (size_t i = 0; i < j->count; i++)
		put_image(f, j, i);
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
	put_extra(f, j->state_extra);
}

static void put_scope(FILE *f, const struct job_entry *e)
{
	fprintf(f, "scope %d %u %u %d %llu %u %d", (int)e->kind, e->job_id, e->step_id,
		(int)e->session_pid, e->session_start, (unsigned)e->uid, (int)e->status);
	put_field(f, e->message);
	fputc('\n', f);
	for (size_t i = 0; i < e->count; i++)
		put_image(f, e, i);
	put_extra(f, e->state_extra);
}

static ssize_t count_write(void *cookie, const char *buf, size_t len)
{
	(void)buf;
	*(size_t *)cookie += len;
	return (ssize_t)len;
}

size_t state_file_image_bytes(const struct job_entry *e, size_t i)
{
	size_t bytes = 0;
	FILE *f = fopencookie(&bytes, "w", (cookie_io_functions_t){ .write = count_write });

	if (!f)
		return 0;
	put_image(f, e, i);
	fclose(f);
	return bytes;
}

size_t state_file_entry_bytes(const struct job_entry *e)
{
	size_t bytes = 0;
	FILE *f = fopencookie(&bytes, "w", (cookie_io_functions_t){ .write = count_write });

	if (!f)
		return 0;
	if (e->kind == HOLDER_JOB)
		put_job(f, e);
	else
		put_scope(f, e);
	fclose(f);
	return bytes;
}

int state_file_format(const struct registry *r, char **text, size_t *len)
{
	FILE *f = open_memstream(text, len);

	if (!f)
		return -1;
	fprintf(f, "%s\nnext %u\n", STATE_MAGIC, r->next_mount_id);
	put_extra(f, r->state_extra);
	/* Only finished mounts: a restarted squashd finds anything half-made
	 * as an unknown leftover and removes it. */
	for (const struct mount_entry *m = r->mounts; m; m = m->next) {
		if (!state_file_keeps_mount(m) || m->key.mode == MOUNT_MODE_MERGED)
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
		/* A union's images, bottom first: "part ID DEV INO SIZE SEC NSEC". */
		for (size_t i = 0; i < m->n_parts; i++)
			fprintf(f, "part %u %ju %ju %jd %" PRId64 " %ld\n", m->id,
				(uintmax_t)m->parts[i].dev, (uintmax_t)m->parts[i].ino,
				(intmax_t)m->parts[i].size, m->parts[i].mtime_sec, m->parts[i].mtime_nsec);
		if (m->state == MOUNT_LINGERING)
			fprintf(f, "linger %u %jd\n", m->id, (intmax_t)linger_expiry_wall(m, squash_now_ms(), time(NULL)));
		put_extra(f, m->state_extra);
	}
	/* Merged mounts, after the mounts they stack: "merged ID MOUNTPOINT
	 * IMAGE LOWERID,..." (bottom first; core/merge.h). Who merges them is
	 * not recorded: a holder's images at one target. */
	for (const struct mount_entry *m = r->mounts; m; m = m->next) {
		if (!state_file_keeps_mount(m) || m->key.mode != MOUNT_MODE_MERGED)
			continue;
		fprintf(f, "merged %u", m->id);
		put_field(f, m->mount_point);
		put_field(f, m->image);
		fputc(' ', f);
		bool any = false;
		/* Only lowers the file holds: one that died or vanished is
		 * left out, as adoption leaves out a vanished one (the merged
		 * mount keeps working on its own copy of it). */
		for (size_t i = 0; i < m->n_lowers; i++)
			if (state_file_keeps_mount(m->lowers[i]) && m->lowers[i]->key.mode != MOUNT_MODE_MERGED) {
				fprintf(f, "%s%u", any ? "," : "", m->lowers[i]->id);
				any = true;
			}
		fputs(any ? "\n" : "-\n", f);
		if (m->state == MOUNT_LINGERING)
			fprintf(f, "linger %u %jd\n", m->id, (intmax_t)linger_expiry_wall(m, squash_now_ms(), time(NULL)));
		put_extra(f, m->state_extra);
	}
	for (const struct job_entry *j = r->jobs; j; j = j->next)
		if (state_file_keeps_entry(j))
			put_job(f, j);
	/* Steps' and sessions' own images: "scope" then its "simage" lines. */
	for (const struct job_entry *e = r->scoped; e; e = e->next)
		if (state_file_keeps_entry(e))
			put_scope(f, e);
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

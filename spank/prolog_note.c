/* Prolog notes (see prolog_note.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "prolog_note.h"

#define NOTE_DIR "prolog-unreached"

/* DIR/prolog-unreached[/JOBID], DIR being the socket's directory. */
static int note_path(const struct squash_settings *s, uint32_t job_id, bool dir_only,
		     char *buf, size_t len)
{
	const char *slash = strrchr(s->socket_path, '/');
	int dirlen = slash ? (int)(slash - s->socket_path) : 0;
	int n = dir_only ? snprintf(buf, len, "%.*s/" NOTE_DIR, dirlen, s->socket_path)
			 : snprintf(buf, len, "%.*s/" NOTE_DIR "/%u", dirlen, s->socket_path, job_id);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

void prolog_note_write(const struct squash_settings *s, uint32_t job_id, const char *reason)
{
	char dir[PATH_MAX], path[PATH_MAX], when[64];
	time_t now = time(NULL);
	struct tm tm;
	int fd;

	if (note_path(s, job_id, true, dir, sizeof dir) || note_path(s, job_id, false, path, sizeof path))
		return;
	/* The socket's directory may not exist yet when squashd never ran. */
	if (mkdir(dir, 0755) < 0 && errno == ENOENT) {
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%s", dir);
		char *slash = strrchr(parent, '/');
		if (slash && slash != parent) {
			*slash = '\0';
			mkdir(parent, 0755);
			mkdir(dir, 0755);
		}
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		slurm_info("spank_squash: job %u: cannot leave a note for the job's steps in %s: %s",
			   job_id, path, strerror(errno));
		return;
	}
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", localtime_r(&now, &tm));
	dprintf(fd, "%s (at %s)", reason, when);
	close(fd);
}

int prolog_note_read(const struct squash_settings *s, uint32_t job_id, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	if (len == 0 || note_path(s, job_id, false, path, sizeof path))
		return -1;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* Shown to the user: keep it printable. */
	for (ssize_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20)
			buf[i] = ' ';
	return 0;
}

void prolog_note_remove(const struct squash_settings *s, uint32_t job_id)
{
	char path[PATH_MAX];

	if (note_path(s, job_id, false, path, sizeof path) == 0)
		unlink(path);
}

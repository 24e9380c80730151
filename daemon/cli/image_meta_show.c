/* An image's metadata without mounting it (see image_meta_show.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/image_meta_show.h"
#include "cli/json_escape.h"
#include "image_meta.h"

#define STDERR_KEEP 1024

/* What the reader printed and how it ended. */
struct cat_result {
	char *out;      /* SQUASH_META_MAX_BYTES + 1 bytes */
	size_t out_len;
	char errtext[STDERR_KEEP];
	size_t err_len;
	int status;     /* waitpid's */
	bool too_long, timed_out;
};

/* The project's own reader (squash-reader --cat), as the caller: the
 * one squashfs parser of the project, every compressor included, with no
 * need for a recent squashfs-tools. $SQUASH_READER names another (the
 * build tree's, in tests), as for squash-pack. */
static const char *reader_path(void)
{
	const char *r = getenv("SQUASH_READER");

	return r && *r ? r : SQUASH_READER_PATH;
}

/* Who reads an image given as a descriptor when root asks (publish):
 * nobody, since the image may be any user's bytes. */
#define NOBODY 65534

static void child(int out_fd, int err_fd, const char *image, int image_fd)
{
	int null = open("/dev/null", O_RDONLY);

	if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		_exit(126);
	if (image_fd >= 0) {
		/* /dev/fd/3, open across exec (dup2 onto itself keeps
		 * close-on-exec: cleared by hand). */
		if (dup2(image_fd, 3) < 0 || fcntl(3, F_SETFD, 0) < 0)
			_exit(126);
		image = "/dev/fd/3";
		if (geteuid() == 0 &&
		    (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
			_exit(126);
	}
	execl(reader_path(), "squash-reader", "--cat", image, SQUASH_META_PATH, (char *)NULL);
	dprintf(2, "cannot run %s: %s\n", reader_path(), strerror(errno));
	_exit(127);
}

static long ms_left(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

/* Reads both pipes until they close, the output passes the bound or the
 * time is up (then the reader is killed). */
static void collect(pid_t pid, int out_fd, int err_fd, struct cat_result *r)
{
	struct pollfd fds[2] = { { out_fd, POLLIN, 0 }, { err_fd, POLLIN, 0 } };
	struct timespec deadline;
	char scratch[4096];

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += SQUASH_META_SHOW_TIMEOUT_S;
	while ((fds[0].fd >= 0 || fds[1].fd >= 0) && !r->too_long) {
		long left = ms_left(&deadline);
		int n;

		if (left <= 0) {
			r->timed_out = true;
			break;
		}
		n = poll(fds, 2, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (int i = 0; i < 2; i++) {
			ssize_t got;

			if (fds[i].fd < 0 || !fds[i].revents)
				continue;
			if (i == 0)
				got = read(fds[i].fd, r->out + r->out_len, SQUASH_META_MAX_BYTES + 1 - r->out_len);
			else
				got = read(fds[i].fd, scratch, sizeof scratch);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				fds[i].fd = -1;
				continue;
			}
			if (i == 0) {
				r->out_len += (size_t)got;
				r->too_long = r->out_len > SQUASH_META_MAX_BYTES;
			} else if (r->err_len < STDERR_KEEP - 1) {
				size_t keep = (size_t)got < STDERR_KEEP - 1 - r->err_len ? (size_t)got
											: STDERR_KEEP - 1 - r->err_len;
				memcpy(r->errtext + r->err_len, scratch, keep);
				r->err_len += keep;
			}
		}
	}
	if (r->too_long || r->timed_out)
		kill(pid, SIGKILL);
	r->errtext[r->err_len] = '\0';
	while (waitpid(pid, &r->status, 0) < 0 && errno == EINTR)
		;
}

static int run_cat(const char *image, int image_fd, struct cat_result *r, char *err, size_t errlen)
{
	int out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot run %s: %s", reader_path(), strerror(errno));
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot run %s: %s", reader_path(), strerror(errno));
		goto fail;
	}
	if (pid == 0)
		child(out[1], errp[1], image, image_fd);
	close(out[1]);
	close(errp[1]);
	collect(pid, out[0], errp[0], r);
	close(out[0]);
	close(errp[0]);
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	return -1;
}

/* The reader's first line of complaint, for messages. */
static const char *first_line(char *text)
{
	char *p = text;

	while (*p == '\n')
		p++;
	p[strcspn(p, "\n")] = '\0';
	return *p ? p : "no reason given";
}

static const char *op_word(enum squash_env_op_kind kind)
{
	switch (kind) {
	case SQUASH_ENV_SET: return "set";
	case SQUASH_ENV_SET_PATH: return "set-path";
	case SQUASH_ENV_PREPEND_PATH: return "prepend-path";
	case SQUASH_ENV_APPEND_PATH: return "append-path";
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
		fprintf(out, "metadata:    none (the image has no /%s; squash-pack writes one)\n",
			SQUASH_META_PATH);
		return;
	}
	fprintf(out, "metadata (/%s):\n", SQUASH_META_PATH);
	fields_of(m, f);
	for (size_t i = 0; i < 9; i++)
		if (f[i].value)
			fprintf(out, "  %s: %s\n", f[i].key, f[i].value);
	for (size_t i = 0; i < m->n_env; i++) {
		if (!first_of_env(m, i))
			continue;
		fprintf(out, "  env %s:\n", m->env[i].env);
		for (size_t j = i; j < m->n_env; j++)
			if (!strcmp(m->env[j].env, m->env[i].env))
				fprintf(out, "    %s %s %s\n", op_word(m->env[j].kind), m->env[j].var,
					m->env[j].kind != SQUASH_ENV_SET && !*m->env[j].value ? "."
											     : m->env[j].value);
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
	fprintf(out, "{\"format\": %d", SQUASH_META_FORMAT);
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
			json_write_string(out, m->env[j].kind != SQUASH_ENV_SET && !*m->env[j].value
						       ? "." : m->env[j].value);
			fputc('}', out);
		}
		fputc(']', out);
	}
	fputs("}}", out);
}

int squash_image_meta_read(const char *image_path, int image_fd, struct squash_image_meta *meta,
			   bool *found, char *err, size_t errlen)
{
	struct cat_result r = { 0 };
	char why[512], *arg = NULL;
	int rc = -1;

	*found = false;
	/* A path starting with '-' must not be taken for an option. */
	if (asprintf(&arg, "%s%s", image_path[0] == '/' ? "" : "./", image_path) < 0 ||
	    !(r.out = malloc(SQUASH_META_MAX_BYTES + 1))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (image_fd < 0 && access(image_path, R_OK) != 0) {
		snprintf(err, errlen, "%s: %s", image_path, strerror(errno));
		goto out;
	}
	if (run_cat(arg, image_fd, &r, err, errlen))
		goto out;
	if (r.timed_out) {
		snprintf(err, errlen, "%s: reading its /%s took more than %d s", image_path,
			 SQUASH_META_PATH, SQUASH_META_SHOW_TIMEOUT_S);
	} else if (r.too_long) {
		snprintf(err, errlen, "%s: /%s is more than the %d bytes a metadata file may have",
			 image_path, SQUASH_META_PATH, SQUASH_META_MAX_BYTES);
		rc = -2;
	} else if (WIFEXITED(r.status) && (WEXITSTATUS(r.status) == 127 || WEXITSTATUS(r.status) == 126)) {
		snprintf(err, errlen, "squash-reader (of slurm-squash) is needed to read an image's metadata: %s",
			 first_line(r.errtext));
	} else if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3) {
		rc = 0; /* the image has no such file: an image squash-pack did not make */
	} else if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
		snprintf(err, errlen, "%s: cannot read /%s: %s", image_path, SQUASH_META_PATH,
			 first_line(r.errtext));
		/* Exit 1: the image or the file in it is at fault (not a
		 * regular file, damaged), as it is for the jobs that read it. */
		rc = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1 ? -2 : -1;
	} else if (squash_image_meta_parse(r.out, r.out_len, meta, why, sizeof why) != 0) {
		snprintf(err, errlen, "%s: /%s: %s", image_path, SQUASH_META_PATH, why);
		rc = -2;
	} else {
		*found = true;
		rc = 0;
	}
out:
	free(arg);
	free(r.out);
	return rc;
}

int squash_image_meta_show(const char *image_path, bool json, FILE *out, char *err,
			   size_t errlen)
{
	struct squash_image_meta meta;
	bool found;

	if (squash_image_meta_read(image_path, -1, &meta, &found, err, errlen) < 0)
		return -1;
	if (json)
		show_json(found ? &meta : NULL, out);
	else
		show_text(found ? &meta : NULL, out);
	if (found)
		squash_image_meta_free(&meta);
	return 0;
}

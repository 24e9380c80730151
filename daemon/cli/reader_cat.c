/* One file of an image through squash-reader --cat (see reader_cat.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/reader_cat.h"

const char *reader_cat_program(void)
{
	const char *r = getenv("SQUASH_READER");

	return r && *r ? r : SQUASH_READER_PATH;
}

/* Who reads an image given as a descriptor when root asks (publish):
 * nobody, since the image may be any user's bytes. */
#define NOBODY 65534

static void child(int out_fd, int err_fd, const char *image, int image_fd, const char *inner)
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
	execl(reader_cat_program(), "squash-reader", "--cat", image, inner, (char *)NULL);
	dprintf(2, "cannot run %s: %s\n", reader_cat_program(), strerror(errno));
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
static void collect(pid_t pid, int out_fd, int err_fd, struct reader_cat_result *r)
{
	struct pollfd fds[2] = { { out_fd, POLLIN, 0 }, { err_fd, POLLIN, 0 } };
	struct timespec deadline;
	char scratch[4096];
	size_t max = r->out_max ? r->out_max : SQUASH_READER_CAT_MAX;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += SQUASH_READER_CAT_TIMEOUT_S;
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
				got = read(fds[i].fd, r->out + r->out_len, max + 1 - r->out_len);
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
				r->too_long = r->out_len > max;
			} else if (r->err_len < sizeof r->errtext - 1) {
				size_t room = sizeof r->errtext - 1 - r->err_len;
				size_t keep = (size_t)got < room ? (size_t)got : room;

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

int reader_cat_run(const char *image, int image_fd, const char *inner, struct reader_cat_result *r,
		   char *err, size_t errlen)
{
	int out[2] = { -1, -1 }, errp[2] = { -1, -1 };
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot run %s: %s", reader_cat_program(), strerror(errno));
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot run %s: %s", reader_cat_program(), strerror(errno));
		goto fail;
	}
	if (pid == 0)
		child(out[1], errp[1], image, image_fd, inner);
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

const char *reader_cat_first_line(char *text)
{
	char *p = text;

	while (*p == '\n')
		p++;
	p[strcspn(p, "\n")] = '\0';
	return *p ? p : "no reason given";
}

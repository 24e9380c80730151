#include "config.h"

#include "mount/fuse_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "process/child_process.h"
#include "process/identity.h"
#include "clock.h"
#include "util/close_from.h"
#include "util/log.h"

#define PROBE_TIMEOUT_MS 3000
#define PROBE_OUTPUT_MAX 8192

void fuse_reader_parse(const char *help, struct fuse_reader *out)
{
	const char *p = strstr(help, "squashfuse ");

	memset(out, 0, sizeof(*out));
	/* The project's own reader (daemon/reader/). */
	if (sscanf(help, "squash-reader %u.%u.%u", &out->major, &out->minor, &out->patch) == 3) {
		out->version_known = out->multithreaded = out->resumes = true;
		out->serves_many = strstr(help, "--serve") != NULL;
		/* SERVE_UNION requests (reader_wire.h): a reader that predates
		 * them would never answer one. */
		out->unions = out->serves_many && strstr(help, "--union") != NULL;
		out->polls = out->serves_many && strstr(help, "--poll-us") != NULL;
		out->learns = out->serves_many && strstr(help, "--profile-cache") != NULL;
		snprintf(out->description, sizeof(out->description), "squash-reader %u.%u.%u, multithreaded",
			 out->major, out->minor, out->patch);
		return;
	}
	/* The first line: "squashfuse 0.6.2 (c) 2012 Dave Vasilevsky". */
	if (p && (p == help || p[-1] == '\n') &&
	    sscanf(p, "squashfuse %u.%u.%u", &out->major, &out->minor, &out->patch) == 3)
		out->version_known = true;
	/* 0.1.x prints libfuse's full option list, -s included, although it
	 * only ever serves one request at a time; a 0.2+ build without
	 * multithreading prints no -s. */
	out->multithreaded = out->version_known && (out->major > 0 || out->minor >= 2) &&
			     strstr(help, "disable multi-threaded operation") != NULL;
	if (out->version_known)
		snprintf(out->description, sizeof(out->description), "squashfuse_ll %u.%u.%u, %s",
			 out->major, out->minor, out->patch,
			 out->multithreaded ? "multithreaded" : "single-threaded");
	else
		snprintf(out->description, sizeof(out->description),
			 "squashfuse_ll (version unknown)");
}

/* Runs in the forked child, never returns. */
static void __attribute__((noreturn)) run_help(const char *path, int outfd)
{
	char *const argv[] = { (char *)"squashfuse_ll", (char *)"-h", NULL };
	char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	int devnull = open("/dev/null", O_RDONLY);
	sigset_t none;

	/* squashd's threads block signals; the helper must not inherit that. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0 || dup2(outfd, STDOUT_FILENO) < 0 ||
	    dup2(outfd, STDERR_FILENO) < 0)
		_exit(127);
	close_from(3);
	/* The binary is the admin's, but asking it for help needs no rights. */
	if (setgroups(0, NULL) < 0 || setgid(IDENTITY_NOBODY) < 0 || setuid(IDENTITY_NOBODY) < 0)
		_exit(126);
	execve(path, argv, envp);
	_exit(127);
}

void fuse_reader_probe(const char *path, struct fuse_reader *out)
{
	char buf[PROBE_OUTPUT_MAX + 1];
	size_t got = 0;
	int pipefd[2], pidfd, status;
	long long deadline = squash_now_ms() + PROBE_TIMEOUT_MS;
	pid_t pid;

	buf[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		log_warning("cannot ask %s for its version: %s", path, strerror(errno));
		fuse_reader_parse("", out);
		return;
	}
	pid = child_fork(&pidfd);
	if (pid == 0)
		run_help(path, pipefd[1]);
	close(pipefd[1]);
	if (pid < 0) {
		log_warning("cannot ask %s for its version: %s", path, strerror(errno));
		close(pipefd[0]);
		fuse_reader_parse("", out);
		return;
	}
	while (got < PROBE_OUTPUT_MAX) {
		struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
		long long left = deadline - squash_now_ms();
		int r = left > 0 ? poll(&p, 1, (int)left) : 0;
		ssize_t k;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		k = read(pipefd[0], buf + got, PROBE_OUTPUT_MAX - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	buf[got] = '\0';
	close(pipefd[0]);
	/* Output alone decides; a child that outlives its answer is killed. */
	if (child_wait(pidfd, squash_now_ms() + 200, &status) == 1)
		close(pidfd);
	else
		child_abandon(pidfd);
	/* Stray NULs would hide the rest from the parser. */
	for (size_t i = 0; i < got; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	fuse_reader_parse(buf, out);
	if (!out->version_known)
		log_warning("%s -h named no squashfuse version; assuming a single-threaded FUSE server",
			    path);
}

/* burst: N simultaneous MountJobRequests to squashd, as N job prologs on one
 * node would send them, and the answer time of each.
 *
 *   burst --socket S --munge-socket M --uid UID --job-base J --n N
 *         [--timeout-ms T] [--no-release] SPEC...
 *   burst --socket S --munge-socket M --job-base J --n N --release-only
 *
 * Child i asks for job J+i with one image, SPEC[i % number of SPECs]
 * (IMAGE:TARGET). Every child signs its request with MUNGE first (the
 * prolog does that before it connects, too), then all wait on one barrier
 * and are let go together; each times connect + send + answer. Then the
 * parent releases the jobs one after the other (ReleaseJobRequest), timing
 * each, unless --no-release. One JSON object per request on stdout:
 *   {"op":"mount","i":0,"job":J,"status":"ok","ms":1.23,"sign_ms":0.4}
 * and {"op":"release",...}. --release-only releases jobs J..J+N-1 and
 * mounts nothing. Exit 0 when every answer arrived (whatever its
 * status), 1 otherwise.
 *
 * Part of the benchmark (tests/bench/run.sh builds it), not of the product. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "frame.h"
#include "squash.pb-c.h"

static struct squash_client_options opts = { .use_munge = true, .timeout_ms = 60000 };

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* Sends a packed request on a fresh connection; returns the response or
 * NULL with err. */
static Squash__Response *exchange(const unsigned char *payload, size_t len,
				  char *err, size_t errlen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = opts.timeout_ms / 1000 };
	static uint8_t buf[SQUASH_FRAME_MAX];
	const uint8_t *pl;
	size_t got = 0, pl_len;
	Squash__Response *resp = NULL;
	int fd, rc;

	snprintf(addr.sun_path, sizeof addr.sun_path, "%s", opts.socket_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
	    connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
		snprintf(err, errlen, "connect: %s", strerror(errno));
		goto out;
	}
	rc = squash_frame_send(fd, SQUASH_FRAME_REQUEST, payload, len);
	if (rc != SQUASH_FRAME_OK) {
		snprintf(err, errlen, "send: %s", rc == SQUASH_FRAME_EIO ? strerror(errno) : squash_frame_strerror(rc));
		goto out;
	}
	rc = squash_frame_recv(fd, buf, &got, opts.timeout_ms);
	if (rc != SQUASH_FRAME_OK) {
		snprintf(err, errlen, "receive: %s%s%s", squash_frame_strerror(rc),
			 rc == SQUASH_FRAME_EIO ? ": " : "",
			 rc == SQUASH_FRAME_EIO ? strerror(errno) : "");
		goto out;
	}
	if (squash_frame_parse(buf, got, SQUASH_FRAME_RESPONSE, &pl, &pl_len, NULL) != SQUASH_FRAME_OK ||
	    !(resp = squash__response__unpack(NULL, pl_len, pl)))
		snprintf(err, errlen, "bad response");
out:
	if (fd >= 0)
		close(fd);
	return resp;
}

static void report(const char *op, int i, unsigned job, Squash__Response *resp,
		   const char *err, double ms, double sign_ms)
{
	printf("{\"op\":\"%s\",\"i\":%d,\"job\":%u,\"status\":", op, i, job);
	json_str(stdout, resp ? squash_status_name(resp->status) : "no-answer");
	printf(",\"ms\":%.3f,\"sign_ms\":%.3f,\"msg\":", ms, sign_ms);
	json_str(stdout, resp ? (resp->message ? resp->message : "") : err);
	printf("}\n");
	fflush(stdout);
}

static int one_mount(int i, unsigned job, unsigned uid, char *spec,
		     int barrier_fd, int ready_fd)
{
	Squash__ImageSpec is = SQUASH__IMAGE_SPEC__INIT;
	Squash__ImageSpec *isp = &is;
	Squash__MountJobRequest mount = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp;
	unsigned char *payload;
	char err[512] = "", *colon = strrchr(spec, ':');
	double t0, sign_ms, ms;
	size_t len;
	char c;

	if (!colon) {
		fprintf(stderr, "burst: SPEC must be IMAGE:TARGET: %s\n", spec);
		return 2;
	}
	*colon = '\0';
	is.image = spec;
	is.target = colon + 1;
	mount.job_id = job;
	mount.uid = uid;
	mount.n_images = 1;
	mount.images = &isp;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mount;
	t0 = now_ms();
	payload = squash_client_pack_request(&opts, &req, &len, err, sizeof err);
	sign_ms = now_ms() - t0;
	/* Say we are ready, then wait for the start signal: the parent closes
	 * the barrier pipe once every child is ready. */
	c = 'r';
	if (write(ready_fd, &c, 1) != 1)
		return 1;
	close(ready_fd);
	while (read(barrier_fd, &c, 1) < 0 && errno == EINTR)
		;
	if (!payload) {
		report("mount", i, job, NULL, err, 0, sign_ms);
		return 1;
	}
	t0 = now_ms();
	resp = exchange(payload, len, err, sizeof err);
	ms = now_ms() - t0;
	report("mount", i, job, resp, err, ms, sign_ms);
	return resp ? 0 : 1;
}

static int one_release(unsigned job)
{
	Squash__ReleaseJobRequest rel = SQUASH__RELEASE_JOB_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp = NULL;
	char err[512] = "";
	double t0 = now_ms();
	int rc;

	rel.job_id = job;
	req.op_case = SQUASH__REQUEST__OP_RELEASE_JOB;
	req.release_job = &rel;
	rc = squash_client_call(&opts, &req, &resp, err, sizeof err);
	report("release", -1, job, rc ? NULL : resp, err, now_ms() - t0, 0);
	if (resp)
		squash__response__free_unpacked(resp, NULL);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "munge-socket", required_argument, NULL, 'm' },
		{ "uid", required_argument, NULL, 'u' },
		{ "job-base", required_argument, NULL, 'j' },
		{ "n", required_argument, NULL, 'n' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "no-release", no_argument, NULL, 'R' },
		{ "release-only", no_argument, NULL, 'O' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned uid = 0, job_base = 0;
	int n = 1, c, nspecs, pipefd[2], readyfd[2], failed = 0, status;
	int ready = 0;
	char byte;
	int release = 1, release_only = 0;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.socket_path = optarg; break;
		case 'm': opts.munge_socket = optarg; break;
		case 'u': uid = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'j': job_base = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': n = atoi(optarg); break;
		case 't': opts.timeout_ms = atoi(optarg); break;
		case 'R': release = 0; break;
		case 'O': release_only = 1; break;
		default: return 2;
		}
	}
	nspecs = argc - optind;
	if (!opts.socket_path || !job_base || n < 1 || (nspecs < 1 && !release_only)) {
		fprintf(stderr, "usage: burst --socket S [--munge-socket M] --uid UID --job-base J --n N [--timeout-ms T] [--no-release] IMAGE:TARGET...\n"
			"       burst --socket S [--munge-socket M] --job-base J --n N --release-only\n");
		return 2;
	}
	if (release_only) {
		for (int i = 0; i < n; i++)
			failed |= one_release(job_base + (unsigned)i);
		return failed;
	}
	if (pipe(pipefd) < 0 || pipe(readyfd) < 0) {
		perror("pipe");
		return 1;
	}
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			n = i;
			failed = 1;
			break;
		}
		if (pid == 0) {
			close(pipefd[1]);
			close(readyfd[0]);
			_exit(one_mount(i, job_base + (unsigned)i, uid,
					argv[optind + i % nspecs], pipefd[0],
					readyfd[1]));
		}
	}
	close(pipefd[0]);
	close(readyfd[1]);
	/* Every child has signed its request (or died) when it wrote its byte
	 * or closed its end; then let them all go at once. */
	while (ready < n) {
		ssize_t r = read(readyfd[0], &byte, 1);

		if (r == 1)
			ready++;
		else if (r == 0 || errno != EINTR)
			break;
	}
	close(readyfd[0]);
	close(pipefd[1]);
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
	if (release)
		for (int i = 0; i < n; i++)
			failed |= one_release(job_base + (unsigned)i);
	return failed;
}

/* squash_rawclient: a small squashd client for the integration tests.
 *
 *   squash_rawclient --socket PATH [--munge-socket PATH] [--no-munge] CMD
 *
 *   mount JOBID UID IMAGE:TARGET[:rw[=DIR]]...  MountJobRequest; prints "STATUS: message",
 *                                    exit 0 when OK, 1 otherwise
 *   stepinfo JOBID                   StepInfoRequest, same output
 *   release JOBID                    ReleaseJobRequest, same output
 *   list                             ListRequest; prints one line per mount
 *   replay                           sends the identical signed list request
 *                                    on two connections; prints both statuses;
 *                                    exit 0 when the second is refused
 *   garbage|short|badmagic|badversion|oversize [N]  (N times, a connection each)
 *   emptyimages N    a mount request of N empty image entries (2 bytes each)
 *                                    sends one hostile frame; prints the
 *                                    response's status (and message) or "closed"
 *   idle [SECONDS]                   connects, sends nothing, waits up to
 *                                    SECONDS (default 5) for squashd to close
 *   --hold FILE (before CMD)         after a mount, stays alive until FILE
 *                                    exists (at most 120 s): squashd watches
 *                                    the process that asked for a step's or
 *                                    session's images
 *
 * Exit status 2: usage error or no connection at all. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "frame.h"
#include "squash.pb-c.h"

#define RECV_TIMEOUT_MS 15000

static struct squash_client_options opts = {
	.socket_path = NULL,
	.use_munge = true,
	.munge_socket = NULL,
	.timeout_ms = RECV_TIMEOUT_MS,
};

static void usage(void)
{
	fprintf(stderr,
		"usage: squash_rawclient --socket PATH [--munge-socket PATH] [--no-munge] CMD\n"
		"  CMD: mount JOBID UID IMAGE:TARGET[:rw[=DIR]]... | stepinfo JOBID | release JOBID | list\n"
		"  (JOBID.STEPID for a step's own images)\n"
		"       | replay | garbage | short | badmagic | badversion | oversize | idle [SECONDS]\n"
		"       | emptyimages N\n");
	exit(2);
}

static unsigned long parse_u32(const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || v > 0xffffffffUL) {
		fprintf(stderr, "squash_rawclient: not a number: %s\n", s);
		exit(2);
	}
	return v;
}

static int connect_socket(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	const char *path = opts.socket_path ? opts.socket_path : SQUASH_DEFAULT_SOCKET;
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "squash_rawclient: socket path too long\n");
		exit(2);
	}
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		fprintf(stderr, "squash_rawclient: cannot connect to %s: %s\n", path,
			strerror(errno));
		exit(2);
	}
	return fd;
}

/* Prints what came back on fd: a status name (and message), "closed", or
 * another receive problem. Returns the status, or -1 when there was none. */
static int print_reply(int fd, const char *label)
{
	uint8_t *buf = malloc(SQUASH_FRAME_MAX);
	const uint8_t *payload;
	size_t len = 0, plen = 0;
	uint16_t version = 0;
	Squash__Response *resp;
	int rc, status = -1;

	if (!buf) {
		perror("malloc");
		exit(2);
	}
	rc = squash_frame_recv(fd, buf, &len, RECV_TIMEOUT_MS);
	if (label)
		printf("%s: ", label);
	if (rc == SQUASH_FRAME_ECLOSED || (rc == SQUASH_FRAME_EIO && errno == ECONNRESET)) {
		printf("closed\n");
	} else if (rc != SQUASH_FRAME_OK) {
		printf("receive error: %s\n", squash_frame_strerror(rc));
	} else if ((rc = squash_frame_parse(buf, len, SQUASH_FRAME_RESPONSE, &payload,
					    &plen, &version)) != SQUASH_FRAME_OK &&
		   (rc != SQUASH_FRAME_EVERSION || len < SQUASH_FRAME_HEADER_SIZE)) {
		printf("bad response frame: %s\n", squash_frame_strerror(rc));
	} else if (rc == SQUASH_FRAME_EVERSION && /* answered in the version sent (badversion) */
		   !(resp = squash__response__unpack(NULL, len - SQUASH_FRAME_HEADER_SIZE,
						     buf + SQUASH_FRAME_HEADER_SIZE))) {
		printf("undecodable response\n");
	} else if (rc == SQUASH_FRAME_OK && !(resp = squash__response__unpack(NULL, plen, payload))) {
		printf("undecodable response\n");
	} else {
		status = resp->status;
		printf("%s%s%s\n", squash_status_name(resp->status),
		       resp->message ? ": " : "", resp->message ? resp->message : "");
		squash__response__free_unpacked(resp, NULL);
	}
	fflush(stdout);
	free(buf);
	return status;
}

static unsigned char *pack(const Squash__Request *req, size_t *len)
{
	char err[512];
	unsigned char *p = squash_client_pack_request(&opts, req, len, err, sizeof(err));

	if (!p) {
		fprintf(stderr, "squash_rawclient: %s\n", err);
		exit(2);
	}
	return p;
}

/* One request/response with the library client; prints the answer. */
static int call(const Squash__Request *req, Squash__Response **out)
{
	char err[512];
	Squash__Response *resp = NULL;

	if (squash_client_call(&opts, req, &resp, err, sizeof(err)) < 0) {
		printf("error: %s\n", err);
		return 2;
	}
	printf("%s%s%s\n", squash_status_name(resp->status),
	       resp->message ? ": " : "", resp->message ? resp->message : "");
	int rc = resp->status == SQUASH__STATUS__OK ? 0 : 1;
	if (out)
		*out = resp;
	else
		squash__response__free_unpacked(resp, NULL);
	return rc;
}

/* "JOBID" or "JOBID.STEPID" (a step's own images). Returns whether a step
 * was named. */
static bool parse_job_step(char *arg, uint32_t *job, uint32_t *step)
{
	char *dot = strchr(arg, '.');

	if (dot)
		*dot = '\0';
	*job = (uint32_t)parse_u32(arg);
	if (dot)
		*step = (uint32_t)parse_u32(dot + 1);
	return dot != NULL;
}

static int cmd_mount(int argc, char **argv)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__MountJobRequest mj = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__ImageSpec *specs, **ptrs;
	Squash__Response *resp = NULL;
	int i, n, rc;

	if (argc < 3)
		usage();
	mj.has_step_id = parse_job_step(argv[0], &mj.job_id, &mj.step_id);
	mj.uid = (uint32_t)parse_u32(argv[1]);
	n = argc - 2;
	specs = calloc((size_t)n, sizeof(*specs));
	ptrs = calloc((size_t)n, sizeof(*ptrs));
	if (!specs || !ptrs) {
		perror("calloc");
		return 2;
	}
	for (i = 0; i < n; i++) {
		char *arg = argv[i + 2];
		size_t len = strlen(arg);
		char *colon;

		squash__image_spec__init(&specs[i]);
		char *upper = strstr(arg, ":rw=");
		if (upper) { /* a writable image keeping its changes in DIR */
			*upper = '\0';
			specs[i].upper = upper + 4;
			specs[i].has_writable = specs[i].writable = 1;
		} else if (len > 3 && !strcmp(arg + len - 3, ":rw")) { /* a writable image */
			arg[len - 3] = '\0';
			specs[i].has_writable = specs[i].writable = 1;
		}
		colon = strrchr(arg, ':');
		if (!colon)
			usage();
		*colon = '\0';
		specs[i].image = arg;
		specs[i].target = colon + 1;
		ptrs[i] = &specs[i];
	}
	mj.n_images = (size_t)n;
	mj.images = ptrs;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mj;
	rc = call(&req, &resp);
	if (resp) {
		for (size_t k = 0; k < resp->n_job_mounts; k++)
			printf("  %s -> %s (%s, %s)\n", resp->job_mounts[k]->image,
			       resp->job_mounts[k]->target, resp->job_mounts[k]->source,
			       squash_mode_name(resp->job_mounts[k]->mode));
		squash__response__free_unpacked(resp, NULL);
	}
	free(specs);
	free(ptrs);
	return rc;
}

static int cmd_job(int argc, char **argv, int op)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__StepInfoRequest si = SQUASH__STEP_INFO_REQUEST__INIT;
	Squash__ReleaseJobRequest rj = SQUASH__RELEASE_JOB_REQUEST__INIT;

	if (argc != 1)
		usage();
	if (op == SQUASH__REQUEST__OP_STEP_INFO) {
		si.has_step_id = parse_job_step(argv[0], &si.job_id, &si.step_id);
		req.step_info = &si;
	} else {
		rj.has_step_id = parse_job_step(argv[0], &rj.job_id, &rj.step_id);
		req.release_job = &rj;
	}
	req.op_case = op;
	return call(&req, NULL);
}

static int cmd_list(void)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__ListRequest lr = SQUASH__LIST_REQUEST__INIT;
	Squash__Response *resp = NULL;
	int rc;

	req.op_case = SQUASH__REQUEST__OP_LIST;
	req.list = &lr;
	rc = call(&req, &resp);
	if (resp) {
		for (size_t i = 0; i < resp->n_mounts; i++) {
			Squash__MountInfo *m = resp->mounts[i];

			printf("%s %s %s refcount=%u jobs=", m->image,
			       squash_mode_name(m->mode), m->mount_point, m->refcount);
			for (size_t j = 0; j < m->n_job_ids; j++)
				printf("%s%u", j ? "," : "", m->job_ids[j]);
			printf("\n");
		}
		squash__response__free_unpacked(resp, NULL);
	}
	return rc;
}

static int cmd_replay(void)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__ListRequest lr = SQUASH__LIST_REQUEST__INIT;
	unsigned char *payload;
	size_t len;
	int fd, first, second;

	req.op_case = SQUASH__REQUEST__OP_LIST;
	req.list = &lr;
	payload = pack(&req, &len);

	fd = connect_socket();
	if (squash_frame_send(fd, SQUASH_FRAME_REQUEST, payload, len) != SQUASH_FRAME_OK) {
		printf("first: send failed\n");
		return 2;
	}
	first = print_reply(fd, "first");
	close(fd);

	fd = connect_socket();
	if (squash_frame_send(fd, SQUASH_FRAME_REQUEST, payload, len) != SQUASH_FRAME_OK)
		printf("second: send failed\n");
	second = print_reply(fd, "second");
	close(fd);
	free(payload);
	if (first != SQUASH__STATUS__OK) {
		fprintf(stderr, "squash_rawclient: the first (fresh) request was not accepted\n");
		return 2;
	}
	return second == SQUASH__STATUS__OK ? 1 : 0;
}

/* Sends raw bytes as one datagram and prints what came back. */
static int send_raw(const uint8_t *buf, size_t len)
{
	int fd = connect_socket();
	ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

	if (n < 0)
		printf("send: %s\n", strerror(errno));
	print_reply(fd, NULL);
	close(fd);
	return 0;
}

static int cmd_hostile(const char *kind)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__ListRequest lr = SQUASH__LIST_REQUEST__INIT;
	unsigned char *payload;
	uint8_t *buf;
	size_t len, total, i;
	int rc;

	buf = malloc(2 * SQUASH_FRAME_MAX);
	if (!buf)
		return 2;
	req.op_case = SQUASH__REQUEST__OP_LIST;
	req.list = &lr;
	if (!strcmp(kind, "garbage")) {
		/* A valid header followed by bytes that are no SignedRequest. */
		memcpy(buf, SQUASH_FRAME_MAGIC, 4);
		buf[4] = 0;
		buf[5] = SQUASH_PROTOCOL_VERSION;
		buf[6] = 0;
		buf[7] = SQUASH_FRAME_REQUEST;
		for (i = 8; i < 512; i++)
			buf[i] = (uint8_t)(0xff - (i * 7));
		rc = send_raw(buf, 512);
	} else if (!strcmp(kind, "short")) {
		memcpy(buf, "SQS", 3);
		rc = send_raw(buf, 3);
	} else if (!strcmp(kind, "badmagic") || !strcmp(kind, "badversion")) {
		payload = pack(&req, &len);
		total = (size_t)squash_frame_encode(buf, SQUASH_FRAME_MAX, SQUASH_FRAME_REQUEST,
						    payload, len);
		if (!strcmp(kind, "badmagic"))
			memcpy(buf, "XQSH", 4);
		else {
			buf[4] = 0x7f;
			buf[5] = 0x3e;
		}
		rc = send_raw(buf, total);
		free(payload);
	} else if (!strncmp(kind, "emptyimages=", 12)) {
		/* SignedRequest{request: Request{mount_job: {job 1, uid 1, N x images {}}}},
		 * unsigned: the decoder must refuse it before anything else. */
		size_t n = parse_u32(kind + 12), body = 4 + 2 * n, off = 8;
		uint8_t *p = buf + off;
		size_t req_len = 1 + 3 + body;
		if (n > 96000) {
			free(buf);
			usage();
		}
		memcpy(buf, SQUASH_FRAME_MAGIC, 4);
		buf[4] = 0;
		buf[5] = SQUASH_PROTOCOL_VERSION;
		buf[6] = 0;
		buf[7] = SQUASH_FRAME_REQUEST;
		*p++ = 0x0a; /* SignedRequest.request, 3-byte length */
		*p++ = (uint8_t)(0x80 | (req_len & 0x7f));
		*p++ = (uint8_t)(0x80 | ((req_len >> 7) & 0x7f));
		*p++ = (uint8_t)(req_len >> 14);
		*p++ = 0x0a; /* Request.mount_job, 3-byte length */
		*p++ = (uint8_t)(0x80 | (body & 0x7f));
		*p++ = (uint8_t)(0x80 | ((body >> 7) & 0x7f));
		*p++ = (uint8_t)(body >> 14);
		*p++ = 0x08; /* job_id */
		*p++ = 0x01;
		*p++ = 0x10; /* uid */
		*p++ = 0x01;
		for (i = 0; i < n; i++) {
			*p++ = 0x1a; /* images */
			*p++ = 0x00;
		}
		rc = send_raw(buf, (size_t)(p - buf));
	} else if (!strcmp(kind, "oversize")) {
		total = SQUASH_FRAME_MAX + 4096;
		memcpy(buf, SQUASH_FRAME_MAGIC, 4);
		buf[4] = 0;
		buf[5] = SQUASH_PROTOCOL_VERSION;
		buf[6] = 0;
		buf[7] = SQUASH_FRAME_REQUEST;
		memset(buf + 8, 'A', total - 8);
		rc = send_raw(buf, total);
	} else {
		usage();
		rc = 2;
	}
	free(buf);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmd_idle(int argc, char **argv)
{
	double secs = argc > 0 ? atof(argv[0]) : 5.0;
	double start = now_s();
	struct pollfd p;
	int fd = connect_socket();
	char c;

	printf("connected\n");
	fflush(stdout);
	p.fd = fd;
	p.events = POLLIN;
	for (;;) {
		double left = secs - (now_s() - start);
		int r;

		if (left <= 0) {
			printf("still open after %.1f s\n", now_s() - start);
			break;
		}
		r = poll(&p, 1, (int)(left * 1000) + 1);
		if (r > 0) {
			ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_TRUNC);

			if (n <= 0) {
				printf("closed after %.1f s\n", now_s() - start);
				break;
			}
			printf("got a %zd-byte datagram after %.1f s\n", n, now_s() - start);
			break;
		}
		if (r < 0 && errno != EINTR)
			break;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "munge-socket", required_argument, NULL, 'm' },
		{ "no-munge", no_argument, NULL, 'n' },
		{ "hold", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd, *hold = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "+s:m:nH:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'H':
			hold = optarg;
			break;
		case 's':
			opts.socket_path = optarg;
			break;
		case 'm':
			opts.munge_socket = optarg;
			break;
		case 'n':
			opts.use_munge = false;
			break;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	cmd = argv[optind++];
	argc -= optind;
	argv += optind;
	if (!strcmp(cmd, "mount")) {
		int rc = cmd_mount(argc, argv);

		for (int i = 0; hold && i < 1200 && access(hold, F_OK) != 0; i++)
			usleep(100000);
		return rc;
	}
	if (!strcmp(cmd, "stepinfo"))
		return cmd_job(argc, argv, SQUASH__REQUEST__OP_STEP_INFO);
	if (!strcmp(cmd, "release"))
		return cmd_job(argc, argv, SQUASH__REQUEST__OP_RELEASE_JOB);
	if (!strcmp(cmd, "list"))
		return cmd_list();
	if (!strcmp(cmd, "replay"))
		return cmd_replay();
	if (!strcmp(cmd, "idle"))
		return cmd_idle(argc, argv);
	if (!strcmp(cmd, "garbage") || !strcmp(cmd, "short") || !strcmp(cmd, "badmagic") ||
	    !strcmp(cmd, "badversion") || !strcmp(cmd, "oversize")) {
		/* [N]: that many, one connection each (a flood). */
		int n = argc > 0 ? atoi(argv[0]) : 1, rc = 0;

		if (n < 1 || n > 10000)
			usage();
		for (int i = 0; i < n && rc != 2; i++)
			rc = cmd_hostile(cmd);
		return rc;
	}
	if (!strcmp(cmd, "emptyimages") && argc == 1) {
		char kind[32];
		snprintf(kind, sizeof(kind), "emptyimages=%s", argv[0]);
		return cmd_hostile(kind);
	}
	usage();
	return 2;
}

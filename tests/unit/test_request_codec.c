/* Server-side request decoding and response sending: valid requests of
 * every kind, and the hostile ones squashd must refuse with a reason. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "frame.h"
#include "imagespec.h"
#include "request_codec.h"
#include "unit.h"

static uint8_t frame[SQUASH_FRAME_MAX];
static char err[512];

/* Frames a SignedRequest payload as a request of the given version. */
static size_t frame_payload(const uint8_t *payload, size_t len, uint16_t version)
{
	long n = squash_frame_encode(frame, sizeof(frame), SQUASH_FRAME_REQUEST,
				     payload, len);

	CHECK(n > 0);
	frame[4] = (uint8_t)(version >> 8);
	frame[5] = (uint8_t)version;
	return n > 0 ? (size_t)n : 0;
}

static size_t frame_request(const Squash__Request *req, uint16_t version)
{
	struct squash_client_options opts = { 0 };
	unsigned char *payload;
	size_t len, n;

	payload = squash_client_pack_request(&opts, req, &len, err, sizeof(err));
	CHECK(payload != NULL);
	if (!payload)
		return 0;
	n = frame_payload(payload, len, version);
	free(payload);
	return n;
}

/* Decodes the frame expecting a refusal with the given status. */
static const char *refusal(size_t len, Squash__Status expect)
{
	struct squash_decoded_request d;
	Squash__Status status = SQUASH__STATUS__OK;

	err[0] = '\0';
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), -1);
	CHECK_INT(status, expect);
	squash_decoded_request_free(&d);
	return err;
}

static void test_valid_requests(void)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__MountJobRequest mount = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__ListRequest list = SQUASH__LIST_REQUEST__INIT;
	Squash__ImageSpec spec = SQUASH__IMAGE_SPEC__INIT;
	Squash__ImageSpec *specs[] = { &spec };
	struct squash_decoded_request d;
	Squash__Status status;
	size_t len;

	spec.image = "/home/alice/tools.sqfs";
	spec.target = "/squash/tools";
	mount.job_id = 77;
	mount.uid = 1000;
	mount.n_images = 1;
	mount.images = specs;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mount;
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
	CHECK_INT(status, SQUASH__STATUS__OK);
	CHECK_INT(d.peer_version, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(d.request->op_case, SQUASH__REQUEST__OP_MOUNT_JOB);
	CHECK_INT(d.request->mount_job->job_id, 77);
	CHECK_INT(d.request->mount_job->uid, 1000);
	CHECK_INT(d.request->mount_job->n_images, 1);
	CHECK_STR(d.request->mount_job->images[0]->image, "/home/alice/tools.sqfs");
	CHECK_STR(d.request->mount_job->images[0]->target, "/squash/tools");
	CHECK(!d.signed_request->has_munge_credential);
	squash_decoded_request_free(&d);
	CHECK(d.request == NULL && d.signed_request == NULL);

	req.op_case = SQUASH__REQUEST__OP_LIST;
	req.list = &list;
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
	CHECK_INT(d.request->op_case, SQUASH__REQUEST__OP_LIST);
	squash_decoded_request_free(&d);
}

static void test_frame_refusals(void)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__StepInfoRequest step = SQUASH__STEP_INFO_REQUEST__INIT;
	struct squash_decoded_request d;
	Squash__Status status;
	size_t len;

	step.job_id = 5;
	req.op_case = SQUASH__REQUEST__OP_STEP_INFO;
	req.step_info = &step;
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION - 1);
	CHECK_STR(refusal(len, SQUASH__STATUS__VERSION_MISMATCH),
		  "the client speaks protocol version 1, squashd (slurm-squash " PACKAGE_VERSION ") speaks "
		  "version 2: the plugin or squashctl is older: upgrade slurm-squash where it runs (upgrade "
		  "order: squashd on the compute nodes first, then the plugin on submit hosts; "
		  "docs/admin.md, \"Upgrading slurm-squash itself\")");
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION + 1);
	CHECK_CONTAINS(refusal(len, SQUASH__STATUS__VERSION_MISMATCH),
		       "the client speaks protocol version 3, squashd (slurm-squash " PACKAGE_VERSION
		       ") speaks version 2: squashd on this node is older: upgrade slurm-squash on the "
		       "compute node (squashd) first");
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION - 1);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, NULL, 0), -1);
	CHECK_INT(d.peer_version, 1);
	squash_decoded_request_free(&d);

	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	frame[7] = SQUASH_FRAME_RESPONSE;
	CHECK_STR(refusal(len, SQUASH__STATUS__BAD_REQUEST),
		  "bad request frame: unexpected message kind");
	memcpy(frame, "GET / HTTP/1.0\r\n", 16);
	CHECK_STR(refusal(16, SQUASH__STATUS__BAD_REQUEST),
		  "bad request frame: not a squashd message (bad magic)");
	CHECK_STR(refusal(3, SQUASH__STATUS__BAD_REQUEST),
		  "bad request frame: message shorter than the frame header");
}

static void test_payload_refusals(void)
{
	/* Field 1 (request) claims 100 bytes, 2 follow. */
	static const uint8_t truncated[] = { 0x0a, 0x64, 0x01, 0x02 };
	/* SignedRequest without its required request field. */
	static const uint8_t no_request[] = { 0x12, 0x01, 'x' };
	/* Request bytes that are not a Request (wire type 7 is invalid). */
	static const uint8_t bad_request[] = { 0x0a, 0x01, 0x0f };
	/* A Request whose mount_job lacks the required uid. */
	static const uint8_t missing_uid[] = { 0x0a, 0x04, 0x0a, 0x02, 0x08, 0x01 };
	/* An empty Request: no operation. */
	static const uint8_t no_op[] = { 0x0a, 0x00 };

	CHECK_STR(refusal(frame_payload(truncated, sizeof(truncated), SQUASH_PROTOCOL_VERSION),
			  SQUASH__STATUS__BAD_REQUEST),
		  "request is not a valid SignedRequest");
	CHECK_STR(refusal(frame_payload(no_request, sizeof(no_request), SQUASH_PROTOCOL_VERSION),
			  SQUASH__STATUS__BAD_REQUEST),
		  "request is not a valid SignedRequest");
	CHECK_STR(refusal(frame_payload(bad_request, sizeof(bad_request), SQUASH_PROTOCOL_VERSION),
			  SQUASH__STATUS__BAD_REQUEST),
		  "signed payload is not a valid Request");
	CHECK_STR(refusal(frame_payload(missing_uid, sizeof(missing_uid), SQUASH_PROTOCOL_VERSION),
			  SQUASH__STATUS__BAD_REQUEST),
		  "signed payload is not a valid Request");
	CHECK_STR(refusal(frame_payload(no_op, sizeof(no_op), SQUASH_PROTOCOL_VERSION),
			  SQUASH__STATUS__BAD_REQUEST),
		  "request names no known operation");
	CHECK_STR(refusal(frame_payload(NULL, 0, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "request is not a valid SignedRequest");
}

/* A varint at p; its length. */
static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	do {
		p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

/* Absurd counts are refused from the wire, before protobuf-c allocates a
 * structure per entry (90,000 empty images fit one frame). */
static void test_counts_before_unpacking(void)
{
	static uint8_t inner[SQUASH_FRAME_MAX], request[SQUASH_FRAME_MAX], signed_req[SQUASH_FRAME_MAX];
	size_t n = 0, r = 0, sr = 0;

	n += put_varint(inner + n, (1 << 3) | 0); /* job_id */
	n += put_varint(inner + n, 7);
	n += put_varint(inner + n, (2 << 3) | 0); /* uid */
	n += put_varint(inner + n, 1000);
	for (int i = 0; i < 90000; i++) {
		inner[n++] = (3 << 3) | 2; /* images: empty ImageSpec */
		inner[n++] = 0;
	}
	request[r++] = (1 << 3) | 2; /* mount_job */
	r += put_varint(request + r, n);
	memcpy(request + r, inner, n);
	r += n;
	signed_req[sr++] = (1 << 3) | 2; /* request */
	sr += put_varint(signed_req + sr, r);
	memcpy(signed_req + sr, request, r);
	sr += r;
	CHECK_STR(refusal(frame_payload(signed_req, sr, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "too many images (more than 1024)");

	/* Two mount_job fields are merged by protobuf: their images add up. */
	r = sr = 0;
	for (int k = 0; k < 2; k++) {
		n = 0;
		n += put_varint(inner + n, (2 << 3) | 0);
		n += put_varint(inner + n, 1000);
		for (int i = 0; i < 600; i++) {
			inner[n++] = (3 << 3) | 2;
			inner[n++] = 0;
		}
		request[r++] = (1 << 3) | 2;
		r += put_varint(request + r, n);
		memcpy(request + r, inner, n);
		r += n;
	}
	signed_req[sr++] = (1 << 3) | 2;
	sr += put_varint(signed_req + sr, r);
	memcpy(signed_req + sr, request, r);
	sr += r;
	CHECK_STR(refusal(frame_payload(signed_req, sr, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "too many images (more than 1024)");

	/* Unknown fields are kept by protobuf-c, one allocation each. */
	r = sr = 0;
	for (int i = 0; i < 40000; i++) {
		r += put_varint(request + r, (99 << 3) | 0);
		request[r++] = 0;
	}
	signed_req[sr++] = (1 << 3) | 2;
	sr += put_varint(signed_req + sr, r);
	memcpy(signed_req + sr, request, r);
	sr += r;
	CHECK_STR(refusal(frame_payload(signed_req, sr, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "request has too many fields (more than 32 in one message)");
}

static void test_limits(void)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__MountJobRequest mount = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__ImageSpec spec = SQUASH__IMAGE_SPEC__INIT;
	Squash__ImageSpec *specs[SQUASH_MAX_IMAGES + 1];
	char *long_path = malloc(SQUASH_PATH_MAX + 1);
	struct squash_decoded_request d;
	Squash__Status status;
	size_t i, len;

	for (i = 0; i < SQUASH_MAX_IMAGES + 1; i++)
		specs[i] = &spec;
	spec.image = "/a.sqfs";
	spec.target = "/squash/a";
	mount.images = specs;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mount;

	mount.n_images = SQUASH_MAX_IMAGES;
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
	squash_decoded_request_free(&d);
	mount.n_images = SQUASH_MAX_IMAGES + 1;
	CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "too many images (more than 1024)");

	/* Every image within its own limit, the list over the text budget. */
	{
		char *long_image = malloc(SQUASH_PATH_MAX);
		memset(long_image, 'i', SQUASH_PATH_MAX - 1);
		long_image[0] = '/';
		long_image[SQUASH_PATH_MAX - 1] = '\0';
		char *saved = spec.image;
		spec.image = long_image;
		mount.n_images = 30; /* 30 * 4,106 bytes: 123,180 > 98,304 */
		CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
			  "the image list is too long (123180 bytes of paths, at most 98304)");
		mount.n_images = 20;
		len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
		CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
		squash_decoded_request_free(&d);
		spec.image = saved;
		free(long_image);
	}

	mount.n_images = 1;
	spec.target = "/squash/a\nfake log line";
	CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "image 1: target contains a control character");
	spec.target = "/squash/a";

	memset(long_path, 'x', SQUASH_PATH_MAX);
	long_path[0] = '/';
	long_path[SQUASH_PATH_MAX] = '\0';
	spec.image = long_path;
	CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "image 1: image path is too long (at most 4095 bytes)");
	long_path[SQUASH_PATH_MAX - 1] = '\0';
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
	squash_decoded_request_free(&d);
	free(long_path);
}

static void test_response_send(void)
{
	Squash__Response resp = SQUASH__RESPONSE__INIT;
	Squash__Response *got;
	const uint8_t *payload;
	size_t payload_len, len;
	char *huge = malloc(SQUASH_FRAME_MAX);
	int sv[2];

	CHECK_INT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	resp.status = SQUASH__STATUS__USER_ERROR;
	resp.message = "image is truncated";
	CHECK_INT(squash_response_send(sv[0], &resp), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_recv(sv[1], frame, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_parse(frame, len, SQUASH_FRAME_RESPONSE, &payload,
				     &payload_len, NULL), SQUASH_FRAME_OK);
	got = squash__response__unpack(NULL, payload_len, payload);
	CHECK(got != NULL);
	if (got) {
		CHECK_INT(got->status, SQUASH__STATUS__USER_ERROR);
		CHECK_STR(got->message, "image is truncated");
		squash__response__free_unpacked(got, NULL);
	}

	/* Too large for a frame: the peer still learns why. */
	memset(huge, 'm', SQUASH_FRAME_MAX - 1);
	huge[SQUASH_FRAME_MAX - 1] = '\0';
	resp.message = huge;
	CHECK_INT(squash_response_send(sv[0], &resp), SQUASH_FRAME_ETOOBIG);
	CHECK_INT(squash_frame_recv(sv[1], frame, &len, 1000), SQUASH_FRAME_OK);
	CHECK_INT(squash_frame_parse(frame, len, SQUASH_FRAME_RESPONSE, &payload,
				     &payload_len, NULL), SQUASH_FRAME_OK);
	got = squash__response__unpack(NULL, payload_len, payload);
	CHECK(got != NULL);
	if (got) {
		CHECK_INT(got->status, SQUASH__STATUS__NODE_ERROR);
		CHECK_CONTAINS(got->message, "response too large for one message");
		squash__response__free_unpacked(got, NULL);
	}
	close(sv[0]);
	close(sv[1]);
	free(huge);
}

/* Step and session fields (srun's step images, squash-shell). */
static void test_step_and_session_fields(void)
{
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__MountJobRequest mount = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__StepInfoRequest info = SQUASH__STEP_INFO_REQUEST__INIT;
	Squash__ReleaseJobRequest release = SQUASH__RELEASE_JOB_REQUEST__INIT;
	Squash__SessionMountRequest session = SQUASH__SESSION_MOUNT_REQUEST__INIT;
	Squash__ImageSpec spec = SQUASH__IMAGE_SPEC__INIT;
	Squash__ImageSpec *specs[SQUASH_MAX_IMAGES + 1];
	struct squash_decoded_request d;
	Squash__Status status;
	size_t len;

	for (size_t i = 0; i < SQUASH_MAX_IMAGES + 1; i++)
		specs[i] = &spec;
	spec.image = "/a.sqfs";
	spec.target = "/squash/a";
	mount.job_id = 5;
	mount.uid = 1000;
	mount.n_images = 1;
	mount.images = specs;
	mount.has_step_id = 1;
	mount.step_id = 3;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mount;
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
	CHECK(d.request->mount_job->has_step_id);
	CHECK_INT(d.request->mount_job->step_id, 3);
	squash_decoded_request_free(&d);
	/* Slurm's batch step (0xfffffffb) has no images of its own. */
	mount.step_id = 0xfffffffbu;
	CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "step id 4294967291 is not the id of an srun job step");

	info.job_id = 5;
	info.has_step_id = 1;
	info.step_id = SQUASH_STEP_ID_LIMIT;
	req.op_case = SQUASH__REQUEST__OP_STEP_INFO;
	req.step_info = &info;
	CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "step id 4294967280 is not the id of an srun job step");
	release.job_id = 5;
	release.has_step_id = 1;
	release.step_id = SQUASH_STEP_ID_LIMIT - 1;
	req.op_case = SQUASH__REQUEST__OP_RELEASE_JOB;
	req.release_job = &release;
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
	squash_decoded_request_free(&d);

	/* A session request is held to the same image limits as a job's. */
	session.images = specs;
	session.n_images = SQUASH_MAX_IMAGES + 1;
	req.op_case = SQUASH__REQUEST__OP_SESSION_MOUNT;
	req.session_mount = &session;
	CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "too many images (more than 1024)");
	session.n_images = 1;
	spec.image = "/a\x1b[2J.sqfs";
	CHECK_STR(refusal(frame_request(&req, SQUASH_PROTOCOL_VERSION), SQUASH__STATUS__BAD_REQUEST),
		  "image 1: image path contains a control character");
	spec.image = "/a.sqfs";
	len = frame_request(&req, SQUASH_PROTOCOL_VERSION);
	CHECK_INT(squash_request_decode(frame, len, &d, &status, err, sizeof(err)), 0);
	CHECK_INT(d.request->op_case, SQUASH__REQUEST__OP_SESSION_MOUNT);
	squash_decoded_request_free(&d);
}

int main(void)
{
	test_counts_before_unpacking();
	test_valid_requests();
	test_frame_refusals();
	test_payload_refusals();
	test_limits();
	test_step_and_session_fields();
	test_response_send();
	return unit_exit_code();
}

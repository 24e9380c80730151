#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "frame.h"
#include "imagespec.h"
#include "request_codec.h"

/* What submit accepts must fit one frame. A list is at most
 * SQUASH_OPTION_MAX bytes of text (imagespec.h), and its paths go on the
 * wire unescaped, so the largest mount request is that text plus protobuf
 * tags and lengths per image (at most 12 bytes for image, target and
 * upper, 3 for the ImageSpec, 2 for the writable flag), the signature
 * wrapper and the MUNGE credential. squashd checks the same total
 * (check_images). */
#define SQUASH_IMAGE_WIRE_OVERHEAD 24
_Static_assert(SQUASH_OPTION_MAX + SQUASH_MAX_IMAGES * SQUASH_IMAGE_WIRE_OVERHEAD + 4096 <=
		       SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE,
	       "a mount request within the documented limits must fit one frame");
/* The step_info answer carries the job's and the step's images (together
 * within the same limits: squashd refuses more) with their node-level
 * mount points (STATE_DIR/mnt/mN; images merged at one target share one),
 * base and mount directories. With the default state_dir a mount point is
 * at most 32 bytes; a longer state_dir with a thousand images can exceed a
 * frame, which squashd then answers with a message saying so
 * (squash_response_send). */
_Static_assert(SQUASH_OPTION_MAX + SQUASH_MAX_IMAGES * (SQUASH_IMAGE_WIRE_OVERHEAD + 32 + 8) +
		       2 * SQUASH_PATH_MAX <= SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE,
	       "a step_info answer within the documented limits must fit one frame");
/* A session mount request is a mount request without job id and uid. */

/* A string field of a request: bounded and printable before any policy
 * code looks at it. */
static int check_string(const char *s, const char *what, size_t index,
			char *err, size_t errlen)
{
	if (!s) {
		squash_errf(err, errlen, "image %zu: missing %s", index, what);
		return -1;
	}
	if (strnlen(s, SQUASH_PATH_MAX) >= SQUASH_PATH_MAX) {
		squash_errf(err, errlen, "image %zu: %s is too long (at most %d bytes)",
			    index, what, SQUASH_PATH_MAX - 1);
		return -1;
	}
	if (squash_has_control_char(s)) {
		squash_errf(err, errlen, "image %zu: %s contains a control character",
			    index, what);
		return -1;
	}
	return 0;
}

/* Slurm's own step ids (batch, extern, interactive, pending) are at or
 * above SLURM_MAX_NORMAL_STEP_ID; only srun's steps get images of their own. */
static int check_step_id(protobuf_c_boolean has, uint32_t step_id, char *err, size_t errlen)
{
	if (has && step_id >= SQUASH_STEP_ID_LIMIT) {
		squash_errf(err, errlen, "step id %u is not the id of an srun job step", step_id);
		return -1;
	}
	return 0;
}

static int check_images(Squash__ImageSpec *const *images, size_t n_images, char *err,
			size_t errlen)
{
	size_t i;

	size_t text = 0;

	if (n_images > SQUASH_MAX_IMAGES) {
		squash_errf(err, errlen, "too many images (%zu, at most %d)",
			    n_images, SQUASH_MAX_IMAGES);
		return -1;
	}
	for (i = 0; i < n_images; i++) {
		const Squash__ImageSpec *spec = images[i];

		if (!spec) {
			squash_errf(err, errlen, "image %zu: missing", i + 1);
			return -1;
		}
		if (check_string(spec->image, "image path", i + 1, err, errlen) < 0 ||
		    check_string(spec->target, "target", i + 1, err, errlen) < 0)
			return -1;
		if (spec->upper && (check_string(spec->upper, "upper directory", i + 1, err, errlen) < 0 ||
				    strlen(spec->upper) >= SQUASH_UPPER_MAX)) {
			if (strlen(spec->upper) >= SQUASH_UPPER_MAX)
				squash_errf(err, errlen, "image %zu: upper directory is too long (at most %d bytes)",
					    i + 1, SQUASH_UPPER_MAX - 1);
			return -1;
		}
		/* Bounded each: at most 3 * SQUASH_PATH_MAX per image. */
		text += strlen(spec->image) + strlen(spec->target) + 2 +
			(spec->upper ? strlen(spec->upper) + 4 : 0);
	}
	if (text > SQUASH_OPTION_MAX) {
		squash_errf(err, errlen, "the image list is too long (%zu bytes of paths, at most %d)",
			    text, SQUASH_OPTION_MAX);
		return -1;
	}
	return 0;
}

static int check_mount_job(const Squash__MountJobRequest *mj, char *err,
			   size_t errlen)
{
	if (check_step_id(mj->has_step_id, mj->step_id, err, errlen) < 0)
		return -1;
	return check_images(mj->images, mj->n_images, err, errlen);
}

/* Exactly one operation, with its message present. */
static int check_request(const Squash__Request *req, char *err, size_t errlen)
{
	switch (req->op_case) {
	case SQUASH__REQUEST__OP_MOUNT_JOB:
		if (!req->mount_job)
			break;
		return check_mount_job(req->mount_job, err, errlen);
	case SQUASH__REQUEST__OP_STEP_INFO:
		if (!req->step_info)
			break;
		return check_step_id(req->step_info->has_step_id, req->step_info->step_id, err, errlen);
	case SQUASH__REQUEST__OP_RELEASE_JOB:
		if (!req->release_job)
			break;
		return check_step_id(req->release_job->has_step_id, req->release_job->step_id, err,
				     errlen);
	case SQUASH__REQUEST__OP_SESSION_MOUNT:
		if (!req->session_mount)
			break;
		return check_images(req->session_mount->images, req->session_mount->n_images, err,
				    errlen);
	case SQUASH__REQUEST__OP_LIST:
		if (!req->list)
			break;
		return 0;
	case SQUASH__REQUEST__OP_GC:
		if (!req->gc)
			break;
		return 0;
	case SQUASH__REQUEST__OP_STATUS:
		if (!req->status)
			break;
		return 0;
	case SQUASH__REQUEST__OP__NOT_SET:
	default:
		break;
	}
	squash_errf(err, errlen, "request names no known operation");
	return -1;
}

/* Counting before unpacking. protobuf-c allocates one structure per
 * entry of a repeated message field (and keeps every unknown field), so a
 * frame of empty image entries (2 bytes each: about 98,000 in one frame)
 * would cost megabytes before the 1,024-image check. The wire format is
 * walked first, without allocating: at most MAX_FIELDS fields per message,
 * SQUASH_MAX_IMAGES images per request. */
#define MAX_FIELDS 32

struct wire_field {
	uint32_t number;
	unsigned type;
	const uint8_t *body; /* length-delimited fields */
	size_t len;
};

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The next field at *p; false at the end or when malformed (*bad). */
static bool wire_next(const uint8_t **p, const uint8_t *end, struct wire_field *f, bool *bad)
{
	uint64_t key, v;

	*bad = false;
	if (*p >= end)
		return false;
	if (!wire_varint(p, end, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX)
		goto malformed;
	f->number = (uint32_t)(key >> 3);
	f->type = key & 7;
	f->body = NULL;
	f->len = 0;
	switch (f->type) {
	case 0:
		if (!wire_varint(p, end, &v))
			goto malformed;
		return true;
	case 1:
	case 5: {
		size_t n = f->type == 1 ? 8 : 4;
		if ((size_t)(end - *p) < n)
			goto malformed;
		*p += n;
		return true;
	}
	case 2:
		if (!wire_varint(p, end, &v) || v > (uint64_t)(end - *p))
			goto malformed;
		f->body = *p;
		f->len = (size_t)v;
		*p += v;
		return true;
	default: /* groups and reserved types: nothing of ours */
		goto malformed;
	}
malformed:
	*bad = true;
	return false;
}

/* Checks the fields of one message: at most MAX_FIELDS besides those
 * numbered `repeated` (0: none), whose count is added to *count (at most
 * max_repeated) and which must be ImageSpecs of at most MAX_FIELDS each. */
static int wire_count(const uint8_t *buf, size_t len, uint32_t repeated, size_t max_repeated,
		      size_t *count, char *err, size_t errlen)
{
	const uint8_t *p = buf, *end = buf + len;
	struct wire_field f;
	size_t fields = 0;
	bool bad;

	while (wire_next(&p, end, &f, &bad)) {
		if (repeated && f.number == repeated) {
			if (++*count > max_repeated) {
				squash_errf(err, errlen, "too many images (more than %zu)", max_repeated);
				return -1;
			}
			/* An ImageSpec: a handful of fields, none repeated. */
			size_t none = 0;
			if (f.type != 2 || wire_count(f.body, f.len, 0, 0, &none, err, errlen) < 0)
				return -1;
		} else if (++fields > MAX_FIELDS) {
			squash_errf(err, errlen, "request has too many fields (more than %d in one message)",
				    MAX_FIELDS);
			return -1;
		}
	}
	/* Malformed past this point: protobuf-c refuses it, having
	 * allocated no more than what was counted. */
	(void)bad;
	return 0;
}

/* The SignedRequest and the Request in it, counted (see above). */
static int wire_check(const uint8_t *payload, size_t len, char *err, size_t errlen)
{
	const uint8_t *p = payload, *end = payload + len;
	struct wire_field f;
	size_t none = 0, images = 0;
	bool bad;

	if (wire_count(payload, len, 0, 0, &none, err, errlen) < 0)
		return -1;
	while (wire_next(&p, end, &f, &bad)) {
		if (f.number != 1 || f.type != 2)
			continue; /* SignedRequest.request */
		const uint8_t *q = f.body, *qend = f.body + f.len;
		struct wire_field op;
		if (wire_count(f.body, f.len, 0, 0, &none, err, errlen) < 0)
			return -1;
		/* Request.mount_job (images: 3) and .session_mount (images: 1);
		 * occurrences of one embedded message are merged: summed here. */
		while (wire_next(&q, qend, &op, &bad)) {
			uint32_t field = op.number == 1 ? 3 : op.number == 50 ? 1 : 0;
			if (op.type == 2 && wire_count(op.body, op.len, field, SQUASH_MAX_IMAGES, &images, err,
						       errlen) < 0)
				return -1;
		}
	}
	return 0;
}

int squash_request_decode(const uint8_t *frame, size_t len,
			  struct squash_decoded_request *out,
			  Squash__Status *status, char *err, size_t errlen)
{
	const uint8_t *payload = NULL;
	size_t payload_len = 0;
	uint16_t peer_version = 0;
	Squash__SignedRequest *sr;
	int rc;

	memset(out, 0, sizeof(*out));
	*status = SQUASH__STATUS__BAD_REQUEST;
	rc = squash_frame_parse(frame, len, SQUASH_FRAME_REQUEST, &payload,
				&payload_len, &peer_version);
	out->peer_version = peer_version;
	if (rc == SQUASH_FRAME_EVERSION) {
		*status = SQUASH__STATUS__VERSION_MISMATCH;
		if (err && errlen)
			squash_frame_version_advice(err, errlen, peer_version, 1);
		return -1;
	}
	if (rc != SQUASH_FRAME_OK) {
		squash_errf(err, errlen, "bad request frame: %s",
			    squash_frame_strerror(rc));
		return -1;
	}
	/* protobuf-c allocates in proportion to the input: counted first. */
	if (wire_check(payload, payload_len, err, errlen) < 0)
		return -1;
	sr = squash__signed_request__unpack(NULL, payload_len, payload);
	if (!sr) {
		squash_errf(err, errlen, "request is not a valid SignedRequest");
		return -1;
	}
	out->signed_request = sr;
	out->request = squash__request__unpack(NULL, sr->request.len,
					       sr->request.data);
	if (!out->request) {
		squash_errf(err, errlen, "signed payload is not a valid Request");
		return -1;
	}
	if (check_request(out->request, err, errlen) < 0)
		return -1;
	*status = SQUASH__STATUS__OK;
	return 0;
}

void squash_decoded_request_free(struct squash_decoded_request *d)
{
	if (d->request)
		squash__request__free_unpacked(d->request, NULL);
	if (d->signed_request)
		squash__signed_request__free_unpacked(d->signed_request, NULL);
	d->request = NULL;
	d->signed_request = NULL;
}

/* What the peer gets instead of a response that does not fit in a frame:
 * a reason rather than a closed connection. */
static int send_too_large(int fd, size_t size)
{
	Squash__Response small = SQUASH__RESPONSE__INIT;
	char message[128];
	uint8_t buf[256];
	size_t len;

	snprintf(message, sizeof(message),
		 "response too large for one message (%zu bytes, at most %d)",
		 size, SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE);
	small.status = SQUASH__STATUS__NODE_ERROR;
	small.message = message;
	len = squash__response__pack(&small, buf);
	squash_frame_send(fd, SQUASH_FRAME_RESPONSE, buf, len);
	return SQUASH_FRAME_ETOOBIG;
}

int squash_response_send(int fd, const Squash__Response *resp)
{
	return squash_response_send_version(fd, SQUASH_PROTOCOL_VERSION, resp);
}

int squash_response_send_version(int fd, uint16_t version, const Squash__Response *resp)
{
	size_t size = squash__response__get_packed_size(resp);
	uint8_t *buf;
	int rc;

	if (size > SQUASH_FRAME_MAX - SQUASH_FRAME_HEADER_SIZE)
		return send_too_large(fd, size);
	buf = malloc(size > 0 ? size : 1);
	if (!buf)
		return SQUASH_FRAME_EIO;
	squash__response__pack(resp, buf);
	rc = squash_frame_send_version(fd, version, SQUASH_FRAME_RESPONSE, buf, size);
	free(buf);
	return rc;
}

/* Server-side decoding of one request frame, shared by squashd and the
 * fuzzers: frame header, SignedRequest, then the Request it carries, plus
 * the structural limits every request must meet before any policy runs
 * (exactly one operation, at most SQUASH_MAX_IMAGES images, strings shorter
 * than SQUASH_PATH_MAX without control characters). */
#ifndef SQUASH_REQUEST_CODEC_H
#define SQUASH_REQUEST_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "squash.pb-c.h"

/* Step ids of srun's steps are below this (Slurm's SLURM_MAX_NORMAL_STEP_ID);
 * the batch, extern and interactive steps never get images of their own. */
#define SQUASH_STEP_ID_LIMIT 0xfffffff0u

struct squash_decoded_request {
	Squash__SignedRequest *signed_request; /* holds request bytes and credential */
	Squash__Request *request;              /* decoded from signed_request->request */
	uint16_t peer_version;                 /* frame header version */
};

/* Returns 0 with *out filled, or -1 with *status (BAD_REQUEST or
 * VERSION_MISMATCH) and a reason in err. *out is always safe to free. */
int squash_request_decode(const uint8_t *frame, size_t len,
			  struct squash_decoded_request *out,
			  Squash__Status *status, char *err, size_t errlen);

void squash_decoded_request_free(struct squash_decoded_request *d);

/* Encodes a Response into a response frame and sends it. Returns 0 or a
 * negative SQUASH_FRAME_* error. A response too large for one frame is
 * replaced by a short NODE_ERROR response saying so, and
 * SQUASH_FRAME_ETOOBIG is returned for the caller to log. */
int squash_response_send(int fd, const Squash__Response *resp);

/* The same in a frame of another protocol version: only for the
 * VERSION_MISMATCH answer to a peer of that version, whose Response keeps
 * status and message (proto/frame.h). */
int squash_response_send_version(int fd, uint16_t version, const Squash__Response *resp);

#endif

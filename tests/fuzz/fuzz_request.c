/* libFuzzer harness: squash_request_decode on a whole request frame (frame
 * header, SignedRequest, Request, structural limits), as squashd runs it on
 * every datagram a peer sends. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "imagespec.h"
#include "request_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a decoded request promises the policy code. */
static void check_invariants(const Squash__Request *req)
{
	size_t i;

	if (req->op_case == SQUASH__REQUEST__OP__NOT_SET)
		abort();
	if (req->op_case != SQUASH__REQUEST__OP_MOUNT_JOB)
		return;
	if (req->mount_job->n_images > SQUASH_MAX_IMAGES)
		abort();
	for (i = 0; i < req->mount_job->n_images; i++) {
		const Squash__ImageSpec *s = req->mount_job->images[i];

		if (strlen(s->image) >= SQUASH_PATH_MAX ||
		    strlen(s->target) >= SQUASH_PATH_MAX)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct squash_decoded_request d;
	Squash__Status status;
	char err[256];

	if (squash_request_decode(data, size, &d, &status, err, sizeof(err)) == 0) {
		uint8_t *again;
		size_t len;

		if (status != SQUASH__STATUS__OK)
			abort();
		check_invariants(d.request);
		/* Re-packing touches every decoded field. */
		len = squash__request__get_packed_size(d.request);
		again = malloc(len + 1);
		if (!again)
			abort();
		squash__request__pack(d.request, again);
		free(again);
	} else if (status != SQUASH__STATUS__BAD_REQUEST &&
		   status != SQUASH__STATUS__VERSION_MISMATCH) {
		abort();
	} else if (strnlen(err, sizeof(err)) == 0) {
		abort(); /* every refusal carries a reason */
	}
	squash_decoded_request_free(&d);
	return 0;
}

/* libFuzzer harness: squash_frame_parse on arbitrary bytes, for both kinds. */
#include <stdint.h>
#include <stdlib.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t kinds[] = { SQUASH_FRAME_REQUEST,
					  SQUASH_FRAME_RESPONSE, 0, 0xFFFF };
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const uint8_t *payload = NULL;
		size_t payload_len = 0;
		uint16_t version = 0;
		int rc = squash_frame_parse(data, size, kinds[i], &payload,
					    &payload_len, &version);

		if (rc == SQUASH_FRAME_OK &&
		    (payload != data + SQUASH_FRAME_HEADER_SIZE ||
		     payload_len + SQUASH_FRAME_HEADER_SIZE != size ||
		     version != SQUASH_PROTOCOL_VERSION))
			abort();
		if (rc == SQUASH_FRAME_OK) {
			/* Re-encoding what parsed must give the same bytes. */
			static uint8_t buf[SQUASH_FRAME_MAX];
			long n = squash_frame_encode(buf, sizeof(buf), kinds[i],
						     payload, payload_len);

			if (n != (long)size)
				abort();
			for (size_t j = 0; j < size; j++)
				if (buf[j] != data[j])
					abort();
		}
		(void)squash_frame_strerror(rc);
	}
	return 0;
}

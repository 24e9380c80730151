/* SHA-256 against the FIPS 180-4 / NIST test vectors, including messages
 * whose padding spills into a second block. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "unit.h"

static const char *hex_digest(const void *data, size_t len)
{
	static char hex[2 * SQUASH_SHA256_SIZE + 1];
	uint8_t d[SQUASH_SHA256_SIZE];

	squash_sha256(data, len, d);
	for (int i = 0; i < SQUASH_SHA256_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return hex;
}

int main(void)
{
	CHECK_STR(hex_digest("", 0),
		  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	CHECK_STR(hex_digest("abc", 3),
		  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* 56 bytes: the length no longer fits in the first padding block. */
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	CHECK_STR(hex_digest(two, strlen(two)),
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* One million 'a': many full blocks. */
	char *million = malloc(1000000);
	CHECK(million != NULL);
	memset(million, 'a', 1000000);
	CHECK_STR(hex_digest(million, 1000000),
		  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(million);
	/* Exactly one block of input (64 bytes) needs a whole padding block. */
	char block[64];
	memset(block, 'a', sizeof(block));
	CHECK_STR(hex_digest(block, sizeof(block)),
		  "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
	return unit_exit_code();
}

/* SHA-256 (FIPS 180-4). The MUNGE credential of a request carries the
 * digest of the request bytes rather than the bytes themselves, so the
 * credential has a fixed size whatever the request's size. */
#ifndef SQUASH_SHA256_H
#define SQUASH_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SQUASH_SHA256_SIZE 32

void squash_sha256(const void *data, size_t len, uint8_t out[SQUASH_SHA256_SIZE]);

#endif

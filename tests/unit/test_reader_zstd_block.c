/* squash-reader's zstd decompressor (daemon/reader/zstd_block.c): good
 * blocks come back exactly; corrupt, truncated and oversize ones are
 * errors that write nothing past the output buffer (a guard zone after it
 * is checked, and ASan watches in the sanitizer build); a thread's context
 * keeps working after errors; threads decompress side by side, each with
 * its own context, freed when it exits (LSan in the sanitizer build). */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "reader/zstd_block.h"
#include "unit.h"

#define BLOCK 8192u
#define GUARD 4096u
#define THREADS 4
#define THREAD_ROUNDS 200

/* Compressible, but not trivially: text-like bytes from a small LCG. */
static void fill(unsigned char *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)("abcdefgh ijklmnop/\n"[(seed >> 16) % 19]);
	}
}

static size_t compress_block(const unsigned char *src, size_t len, unsigned char *dst, size_t cap)
{
	size_t n = ZSTD_compress(dst, cap, src, len, 3);

	return ZSTD_isError(n) ? 0 : n;
}

/* Output buffer of cap bytes followed by a guard zone. */
struct out_buf {
	unsigned char *mem;
	size_t cap;
};

static void out_init(struct out_buf *o, size_t cap)
{
	o->cap = cap;
	o->mem = malloc(cap + GUARD);
	memset(o->mem, 0xa5, cap + GUARD);
}

static int guard_intact(const struct out_buf *o)
{
	for (size_t i = 0; i < GUARD; i++)
		if (o->mem[o->cap + i] != 0xa5)
			return 0;
	return 1;
}

static void test_good_block(void)
{
	unsigned char src[BLOCK], z[2 * BLOCK];
	struct out_buf o;
	size_t zlen, outsz;

	fill(src, sizeof(src), 1);
	zlen = compress_block(src, sizeof(src), z, sizeof(z));
	CHECK(zlen > 0 && zlen < BLOCK);
	out_init(&o, BLOCK);
	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(z, zlen, o.mem, &outsz), 0);
	CHECK_INT(outsz, BLOCK);
	CHECK(memcmp(o.mem, src, BLOCK) == 0);
	CHECK(guard_intact(&o));

	/* A short block (a file's tail): *outsz says how much came out. */
	zlen = compress_block(src, 1000, z, sizeof(z));
	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(z, zlen, o.mem, &outsz), 0);
	CHECK_INT(outsz, 1000);
	CHECK(memcmp(o.mem, src, 1000) == 0);
	free(o.mem);
}

/* Every single-byte corruption and every truncation of a good block ends
 * in an answer, never a write past the buffer; then a good block still
 * decompresses on the same thread's context. */
static void test_corrupt_blocks(void)
{
	unsigned char src[BLOCK], z[2 * BLOCK], bad[2 * BLOCK];
	struct out_buf o;
	size_t zlen, outsz;
	unsigned errors = 0, overruns = 0, lies = 0;

	fill(src, sizeof(src), 2);
	zlen = compress_block(src, sizeof(src), z, sizeof(z));
	out_init(&o, BLOCK);
	for (size_t pos = 0; pos < zlen; pos++)
		for (unsigned flip = 1; flip < 256; flip <<= 2) {
			memcpy(bad, z, zlen);
			bad[pos] ^= (unsigned char)flip;
			outsz = o.cap;
			if (zstd_block_decompress(bad, zlen, o.mem, &outsz) != 0)
				errors++;
			else if (outsz > o.cap)
				lies++;
			if (!guard_intact(&o))
				overruns++;
		}
	for (size_t len = 0; len < zlen; len++) {
		outsz = o.cap;
		if (zstd_block_decompress(z, len, o.mem, &outsz) != 0)
			errors++;
		else
			lies++; /* a cut frame is never complete */
		if (!guard_intact(&o))
			overruns++;
	}
	CHECK(errors > zlen);
	CHECK_INT(lies, 0);
	CHECK_INT(overruns, 0);

	/* Only a skippable frame: no data, which no block is. */
	memcpy(bad, "\x50\x2a\x4d\x18\x01\x00\x00\x00x", 9);
	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(bad, 9, o.mem, &outsz), -1);

	/* Not zstd at all. */
	memset(bad, 0x5a, sizeof(bad));
	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(bad, sizeof(bad), o.mem, &outsz), -1);
	CHECK(guard_intact(&o));

	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(z, zlen, o.mem, &outsz), 0);
	CHECK_INT(outsz, BLOCK);
	CHECK(memcmp(o.mem, src, BLOCK) == 0);
	free(o.mem);
}

/* A frame that decodes to more than the block may hold: an error, with
 * nothing written past the buffer, whether or not the frame header says
 * its size (a streamed frame does not). */
static void test_oversize_output(void)
{
	unsigned char src[4 * BLOCK], z[8 * BLOCK];
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_inBuffer in = { src, sizeof(src), 0 };
	ZSTD_outBuffer zo = { z, sizeof(z), 0 };
	struct out_buf o;
	size_t zlen, outsz;

	fill(src, sizeof(src), 3);
	out_init(&o, BLOCK);
	zlen = compress_block(src, sizeof(src), z, sizeof(z));
	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(z, zlen, o.mem, &outsz), -1);
	CHECK(guard_intact(&o));

	ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
	CHECK_INT(ZSTD_compressStream2(cc, &zo, &in, ZSTD_e_end), 0);
	CHECK_INT(ZSTD_getFrameContentSize(z, zo.pos), ZSTD_CONTENTSIZE_UNKNOWN);
	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(z, zo.pos, o.mem, &outsz), -1);
	CHECK(guard_intact(&o));

	/* One byte too many is too many. */
	zlen = compress_block(src, BLOCK + 1, z, sizeof(z));
	outsz = o.cap;
	CHECK_INT(zstd_block_decompress(z, zlen, o.mem, &outsz), -1);
	CHECK(guard_intact(&o));
	ZSTD_freeCCtx(cc);
	free(o.mem);
}

static void *decompress_many(void *arg)
{
	unsigned char src[BLOCK], z[2 * BLOCK], out[BLOCK];
	uint32_t seed = (uint32_t)(uintptr_t)arg;
	long bad = 0;

	for (int i = 0; i < THREAD_ROUNDS; i++) {
		size_t len = 1 + (seed + (uint32_t)i * 97u) % BLOCK, zlen, outsz = sizeof(out);
		bool corrupt = i % 10 == 9; /* now and then a bad one in between */
		int r;

		fill(src, len, seed + (uint32_t)i);
		zlen = compress_block(src, len, z, sizeof(z));
		if (corrupt)
			z[zlen / 2] ^= 0x55;
		r = zstd_block_decompress(z, zlen, out, &outsz);
		if (!corrupt && (r != 0 || outsz != len || memcmp(out, src, len) != 0))
			bad++;
	}
	return (void *)bad;
}

static void test_threads(void)
{
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		CHECK_INT(pthread_create(&t[i], NULL, decompress_many, (void *)(uintptr_t)(i + 10)), 0);
	for (int i = 0; i < THREADS; i++) {
		void *bad;

		CHECK_INT(pthread_join(t[i], &bad), 0);
		CHECK_INT((long)bad, 0);
	}
}

int main(void)
{
	test_good_block();
	test_corrupt_blocks();
	test_oversize_output();
	test_threads();
	return unit_exit_code();
}

/* squash-reader's xz and legacy lzma decoders (daemon/reader/xz_block.h):
 * a block whose stream claims a dictionary far beyond the image's block
 * size is refused before liblzma allocates it; blocks as mksquashfs writes
 * them (dictionary at most the block size, with or without a BCJ filter;
 * lzma with its size in the header) decode; too small an output, damage
 * and emptiness fail cleanly. */
#include "config.h"

#include <lzma.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reader/xz_block.h"
#include "unit.h"

/* An xz stream of data as mksquashfs writes a block: LZMA2 with the given
 * dictionary, optionally behind the x86 BCJ filter, CRC32 check. */
static size_t encode(const unsigned char *data, size_t len, uint32_t dict, int bcj,
		     unsigned char *out, size_t cap)
{
	lzma_options_lzma opt;
	lzma_filter filters[3];
	size_t pos = 0;
	int n = 0;

	lzma_lzma_preset(&opt, 6);
	opt.dict_size = dict;
	if (bcj)
		filters[n++] = (lzma_filter){ LZMA_FILTER_X86, NULL };
	filters[n++] = (lzma_filter){ LZMA_FILTER_LZMA2, &opt };
	filters[n] = (lzma_filter){ LZMA_VLI_UNKNOWN, NULL };
	if (lzma_stream_buffer_encode(filters, LZMA_CHECK_CRC32, NULL, data, len, out, &pos, cap) !=
	    LZMA_OK)
		return 0;
	return pos;
}

/* A legacy lzma block as mksquashfs -comp lzma writes it: an .lzma stream
 * whose header carries the uncompressed size (-1, unknown, when not
 * size_in_header). */
static size_t encode_lzma(const unsigned char *data, size_t len, uint32_t dict, int size_in_header,
			  unsigned char *out, size_t cap)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	lzma_options_lzma opt;
	size_t n = 0;

	lzma_lzma_preset(&opt, 6);
	opt.dict_size = dict;
	if (lzma_alone_encoder(&strm, &opt) != LZMA_OK)
		return 0;
	strm.next_in = data;
	strm.avail_in = len;
	strm.next_out = out;
	strm.avail_out = cap;
	if (lzma_code(&strm, LZMA_FINISH) == LZMA_STREAM_END)
		n = (size_t)strm.total_out;
	lzma_end(&strm);
	for (int i = 0; size_in_header && n > 13 && i < 8; i++)
		out[5 + i] = (unsigned char)((uint64_t)len >> (8 * i));
	return n;
}

static void test_legacy_lzma(const unsigned char *data, size_t block)
{
	static unsigned char packed[(1u << 17) + 4096], out[(1u << 17) + 16];
	uint64_t limit = xz_block_memlimit((uint32_t)block);
	size_t n, outsz;

	/* As mksquashfs writes them, and with the size unknown: exact. */
	for (int sized = 0; sized < 2; sized++) {
		n = encode_lzma(data, block, (uint32_t)block, sized, packed, sizeof(packed));
		CHECK(n > 0);
		outsz = block;
		CHECK_INT(lzma_block_decompress(packed, n, out, &outsz, limit), 0);
		CHECK_INT(outsz, block);
		CHECK(!memcmp(out, data, block));
		/* One byte short: refused, nothing written past it. */
		memset(out, 0, block);
		out[block - 1] = 0x5a;
		outsz = block - 1;
		CHECK_INT(lzma_block_decompress(packed, n, out, &outsz, limit), -1);
		CHECK_INT(out[block - 1], 0x5a);
	}
	/* A dictionary of 64 MiB in an image of 128 KiB blocks: refused
	 * before it is allocated (libsquashfuse 0.5 allows 32 MiB whatever
	 * the block size); decodes under a limit that allows it. */
	n = encode_lzma(data, 1000, 64u << 20, 1, packed, sizeof(packed));
	CHECK(n > 0);
	outsz = block;
	CHECK_INT(lzma_block_decompress(packed, n, out, &outsz, limit), -1);
	outsz = block;
	CHECK_INT(lzma_block_decompress(packed, n, out, &outsz, 128u << 20), 0);
	CHECK_INT(outsz, 1000);
	/* Damage, truncation, nothing, and a stream of no data. */
	n = encode_lzma(data, block, (uint32_t)block, 1, packed, sizeof(packed));
	packed[n / 2] ^= 0x40;
	outsz = block;
	CHECK_INT(lzma_block_decompress(packed, n, out, &outsz, limit), -1);
	n = encode_lzma(data, block, (uint32_t)block, 1, packed, sizeof(packed));
	outsz = block;
	CHECK_INT(lzma_block_decompress(packed, n - 1, out, &outsz, limit), -1);
	outsz = block;
	CHECK_INT(lzma_block_decompress(packed, 0, out, &outsz, limit), -1);
	n = encode_lzma(data, 0, (uint32_t)block, 1, packed, sizeof(packed));
	outsz = block;
	CHECK_INT(lzma_block_decompress(packed, n, out, &outsz, limit), -1);
}

int main(void)
{
	enum { BLOCK = 131072 };
	static unsigned char data[BLOCK], packed[BLOCK + 4096], out[BLOCK + 16];
	size_t n, outsz;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)((i * 7) ^ (i >> 9));

	/* As mksquashfs writes them: decoded exactly. */
	for (int bcj = 0; bcj < 2; bcj++) {
		n = encode(data, sizeof(data), BLOCK, bcj, packed, sizeof(packed));
		CHECK(n > 0);
		outsz = BLOCK;
		CHECK_INT(xz_block_decompress(packed, n, out, &outsz, xz_block_memlimit(BLOCK)), 0);
		CHECK_INT(outsz, BLOCK);
		CHECK(!memcmp(out, data, BLOCK));
		/* An output one byte short: refused, nothing written past it. */
		out[BLOCK - 1] = 0x5a;
		outsz = BLOCK - 1;
		memset(out, 0, BLOCK);
		out[BLOCK - 1] = 0x5a;
		CHECK_INT(xz_block_decompress(packed, n, out, &outsz, xz_block_memlimit(BLOCK)), -1);
		CHECK_INT(out[BLOCK - 1], 0x5a);
	}

	/* The smallest and the largest block sizes. */
	n = encode(data, 4096, 4096, 0, packed, sizeof(packed));
	outsz = 4096;
	CHECK_INT(xz_block_decompress(packed, n, out, &outsz, xz_block_memlimit(4096)), 0);
	n = encode(data, sizeof(data), 1u << 20, 0, packed, sizeof(packed));
	outsz = BLOCK;
	CHECK_INT(xz_block_decompress(packed, n, out, &outsz, xz_block_memlimit(1u << 20)), 0);

	/* A dictionary of 64 MiB in an image of 128 KiB blocks: over the
	 * limit, refused (libsquashfuse would allocate it); the same stream
	 * decodes with a limit that allows it. */
	n = encode(data, 1000, 64u << 20, 0, packed, sizeof(packed));
	CHECK(n > 0);
	outsz = BLOCK;
	CHECK_INT(xz_block_decompress(packed, n, out, &outsz, xz_block_memlimit(BLOCK)), -1);
	outsz = BLOCK;
	CHECK_INT(xz_block_decompress(packed, n, out, &outsz, 128u << 20), 0);
	CHECK_INT(outsz, 1000);
	CHECK(xz_block_memlimit(BLOCK) < (2u << 20));

	/* Damage, truncation, nothing, and a stream of no data. */
	n = encode(data, sizeof(data), BLOCK, 0, packed, sizeof(packed));
	packed[n / 2] ^= 0x40;
	outsz = BLOCK;
	CHECK_INT(xz_block_decompress(packed, n, out, &outsz, xz_block_memlimit(BLOCK)), -1);
	n = encode(data, sizeof(data), BLOCK, 0, packed, sizeof(packed));
	outsz = BLOCK;
	CHECK_INT(xz_block_decompress(packed, n - 1, out, &outsz, xz_block_memlimit(BLOCK)), -1);
	outsz = BLOCK;
	CHECK_INT(xz_block_decompress(packed, 0, out, &outsz, xz_block_memlimit(BLOCK)), -1);
	n = encode(data, 0, BLOCK, 0, packed, sizeof(packed));
	outsz = BLOCK;
	CHECK_INT(xz_block_decompress(packed, n, out, &outsz, xz_block_memlimit(BLOCK)), -1);
	test_legacy_lzma(data, BLOCK);
	return unit_exit_code();
}

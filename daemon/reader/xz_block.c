/* squash-reader's xz and legacy lzma decoders, under a memory limit
 * (xz_block.h). */
#include "config.h"

#include "reader/xz_block.h"

#include <lzma.h>

uint64_t xz_block_memlimit(uint32_t block_size)
{
	return (uint64_t)block_size + (1u << 20);
}

int xz_block_decompress(void *in, size_t insz, void *out, size_t *outsz, uint64_t memlimit)
{
	size_t in_pos = 0, out_pos = 0;
	/* One xz stream per block, as mksquashfs writes them (CRC32 check). */
	lzma_ret ret = lzma_stream_buffer_decode(&memlimit, 0, NULL, in, &in_pos, insz, out,
						 &out_pos, *outsz);

	if (ret != LZMA_OK || out_pos == 0)
		return -1;
	*outsz = out_pos;
	return 0;
}

int lzma_block_decompress(void *in, size_t insz, void *out, size_t *outsz, uint64_t memlimit)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	lzma_ret ret;

	/* The decoder checks the header's dictionary against memlimit
	 * before it allocates anything (LZMA_MEMLIMIT_ERROR). */
	if (lzma_alone_decoder(&strm, memlimit) != LZMA_OK)
		return -1;
	strm.next_in = in;
	strm.avail_in = insz;
	strm.next_out = out;
	strm.avail_out = *outsz;
	ret = lzma_code(&strm, LZMA_FINISH);
	/* A stream that names its size ends there; one with an unknown size
	 * (-1) ends at its end marker. Either way, all of it must fit. */
	if (ret == LZMA_STREAM_END && strm.total_out > 0) {
		*outsz = (size_t)strm.total_out;
		lzma_end(&strm);
		return 0;
	}
	lzma_end(&strm);
	return -1;
}

/* squash-reader's xz decompressor, under a memory limit (xz_block.h). */
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

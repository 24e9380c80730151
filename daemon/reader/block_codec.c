/* Which decoder reads an image's blocks (block_codec.h). */
#include "config.h"

#include "reader/block_codec.h"

#include "reader/squashfuse_block.h"
#include "reader/xz_block.h"
#include "reader/zstd_block.h"
#include "squashfs_format.h"

int block_codec_init(struct block_codec *codec, uint16_t compression, uint32_t block_size)
{
	codec->compression = compression;
	codec->memlimit = xz_block_memlimit(block_size);
	switch (compression) {
	case SQUASH_COMP_XZ:
	case SQUASH_COMP_LZMA:
		return 0;
#ifdef HAVE_LIBZSTD
	case SQUASH_COMP_ZSTD:
		return 0;
#endif
	default:
		return squashfuse_block_supports(compression) ? 0 : -1;
	}
}

int block_codec_decompress(const struct block_codec *codec, void *in, size_t insz, void *out,
			   size_t *outsz)
{
	switch (codec->compression) {
	case SQUASH_COMP_XZ:
		return xz_block_decompress(in, insz, out, outsz, codec->memlimit);
	case SQUASH_COMP_LZMA:
		return lzma_block_decompress(in, insz, out, outsz, codec->memlimit);
#ifdef HAVE_LIBZSTD
	case SQUASH_COMP_ZSTD:
		return zstd_block_decompress(in, insz, out, outsz);
#endif
	default:
		return squashfuse_block_decompress(codec->compression, in, insz, out, outsz);
	}
}

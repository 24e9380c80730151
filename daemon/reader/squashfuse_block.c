/* libsquashfuse's decoders behind squashfuse_block.h. The only file that
 * includes libsquashfuse's header, and the only one of the reader without
 * the project's config.h: libsquashfuse's headers include a config.h of
 * their own (PACKAGE, VERSION, _POSIX_C_SOURCE), which would clash with
 * ours. Nothing here needs ours. */
#include <decompress.h>

#include "reader/squashfuse_block.h"

bool squashfuse_block_supports(int compression)
{
	return sqfs_decompressor_get(compression) != NULL;
}

int squashfuse_block_decompress(int compression, void *in, size_t insz, void *out,
				size_t *outsz)
{
	sqfs_decompressor decompress = sqfs_decompressor_get(compression);

	if (!decompress || decompress(in, insz, out, outsz) != SQFS_OK)
		return -1;
	return 0;
}

/* libFuzzer harness: the squashfs superblock check. The first 96 bytes are
 * the superblock; the next 8 (little-endian), when present, are the file
 * size, else the input size is. */
#include <stdint.h>
#include <stdlib.h>

#include "superblock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum squash_reader readers[] = {
		SQUASH_READER_ANY, SQUASH_READER_FUSE, SQUASH_READER_KERNEL
	};
	uint64_t file_size = size;
	size_t i;

	if (size >= SQUASH_SUPERBLOCK_SIZE + 8) {
		file_size = 0;
		for (i = 0; i < 8; i++)
			file_size |= (uint64_t)data[SQUASH_SUPERBLOCK_SIZE + i] << (8 * i);
	}
	for (i = 0; i < sizeof(readers) / sizeof(readers[0]); i++) {
		struct squash_superblock_info info;
		char err[256];

		if (squash_superblock_check(data, size, file_size, readers[i],
					    &info, err, sizeof(err)) == 0) {
			/* What the check promises its callers. */
			if (info.bytes_used > file_size ||
			    info.bytes_used < SQUASH_SUPERBLOCK_SIZE ||
			    info.block_size < 4096 || info.block_size > 1048576 ||
			    (info.block_size & (info.block_size - 1)) != 0 ||
			    !squash_compression_supported(info.compression, readers[i]))
				abort();
		}
	}
	return 0;
}

/* libFuzzer harness: the squashfs superblock check, the one validator
 * (squash_superblock_read, proto/squashfs_format.h) and the readers'
 * compression policy on top of it (squash_superblock_check). The first 96
 * bytes are the superblock; the next 8 (little-endian), when present, are
 * the file size, else the input size is. */
#include <stdint.h>
#include <stdlib.h>

#include "superblock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		abort();
}

/* What the validator promises its callers (squashd, the plugin and
 * squash-reader's image_open, whose offset checks build on it). */
static void check_promises(const struct squash_superblock *sb, uint64_t file_size)
{
	check(sb->bytes_used <= file_size && sb->bytes_used >= SQUASH_SUPERBLOCK_SIZE);
	check(sb->block_size >= SQUASH_BLOCK_SIZE_MIN && sb->block_size <= SQUASH_BLOCK_SIZE_MAX);
	check((sb->block_size & (sb->block_size - 1)) == 0);
	check((UINT32_C(1) << sb->block_log) == sb->block_size);
	check(sb->compression >= SQUASH_COMP_GZIP && sb->compression <= SQUASH_COMP_ZSTD);
	check(sb->inode_table >= SQUASH_SUPERBLOCK_SIZE && sb->inode_table < sb->directory_table);
	check(sb->directory_table < sb->bytes_used && sb->id_table < sb->bytes_used);
	check(sb->no_ids > 0);
	check(sb->fragments == 0 || sb->fragment_table < sb->bytes_used);
	check((sb->root_inode & 0xffff) < SQUASH_METADATA_SIZE);
	check((sb->root_inode >> 16) < sb->directory_table - sb->inode_table);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum squash_reader readers[] = {
		SQUASH_READER_ANY, SQUASH_READER_FUSE, SQUASH_READER_KERNEL
	};
	struct squash_superblock sb;
	uint64_t file_size = size;
	char err[256];
	int valid;
	size_t i;

	if (size >= SQUASH_SUPERBLOCK_SIZE + 8)
		file_size = le64(data + SQUASH_SUPERBLOCK_SIZE);
	valid = squash_superblock_read(data, size, file_size, &sb, err, sizeof(err)) == 0;
	if (valid)
		check_promises(&sb, file_size);
	for (i = 0; i < sizeof(readers) / sizeof(readers[0]); i++) {
		struct squash_superblock checked;

		if (squash_superblock_check(data, size, file_size, readers[i], &checked, err,
					    sizeof(err)) == 0) {
			/* Only what the validator accepts, in a compression
			 * the reader supports. */
			check(valid);
			check(squash_compression_supported(checked.compression, readers[i]));
			check(checked.bytes_used == sb.bytes_used);
		}
	}
	return 0;
}

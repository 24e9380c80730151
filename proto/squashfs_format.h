/* The squashfs 4.0 on-disk format as every part of slurm-squash reads it:
 * its little-endian fields, its limits and the superblock, decoded and
 * checked in one place (squash_superblock_read) for the plugin's
 * submission check and squashd (superblock.h) and for squash-reader's
 * image_open. The image is hostile (a user's own file): whatever passes
 * here is what every later offset check may rely on. */
#ifndef SQUASH_SQUASHFS_FORMAT_H
#define SQUASH_SQUASHFS_FORMAT_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SQUASH_SUPERBLOCK_SIZE 96
#define SQUASH_METADATA_SIZE 8192u  /* a decompressed metadata block */
#define SQUASH_BLOCK_SIZE_MIN 4096u
#define SQUASH_BLOCK_SIZE_MAX 1048576u
#define SQUASH_TABLE_ABSENT UINT64_MAX /* an optional table's start when it has none */

enum squash_compression {
	SQUASH_COMP_GZIP = 1,
	SQUASH_COMP_LZMA = 2,
	SQUASH_COMP_LZO = 3,
	SQUASH_COMP_XZ = 4,
	SQUASH_COMP_LZ4 = 5,
	SQUASH_COMP_ZSTD = 6,
};

/* "gzip", "lzma" (legacy), "lzo", "xz", "lz4", "zstd" or "unknown". */
const char *squash_compression_name(uint16_t compression);

/* The superblock's fields; table starts are byte positions in the image. */
struct squash_superblock {
	uint32_t inodes;
	uint32_t mkfs_time;   /* when it was made, seconds since the epoch (mksquashfs -mkfs-time) */
	uint32_t block_size;
	uint32_t fragments;
	uint16_t compression; /* enum squash_compression */
	uint16_t block_log;
	uint16_t flags;
	uint16_t no_ids;
	uint64_t root_inode;  /* metadata block (from the inode table) << 16 | offset */
	uint64_t bytes_used;
	uint64_t id_table;
	uint64_t xattr_table; /* SQUASH_TABLE_ABSENT: no xattrs */
	uint64_t inode_table;
	uint64_t directory_table;
	uint64_t fragment_table; /* SQUASH_TABLE_ABSENT when fragments is 0 */
	uint64_t export_table;   /* SQUASH_TABLE_ABSENT: not exportable */
};

static inline uint16_t le16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t le32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t le64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* Decodes the first len bytes of an image whose file is file_size bytes
 * long and checks them: magic, version 4.0, block size a power of two from
 * 4 KiB to 1 MiB that block_log agrees with, a known compression id, no
 * flag squashfs 4.0 does not define, bytes_used from the superblock's end
 * to the file's, every table inside bytes_used (the inode table before the
 * directory table, the root inode inside the inode table), at least one
 * id, and a fragment table when there are fragments. Whether a reader can
 * decode the compression is the caller's question. Returns 0 with *sb
 * filled, or -1 with a user-facing reason in err (e.g. "not a squashfs
 * image (bad magic)"). */
int squash_superblock_read(const uint8_t *buf, size_t len, uint64_t file_size,
			   struct squash_superblock *sb, char *err, size_t errlen);

#endif

#include "config.h"

#include <stdbool.h>
#include <string.h>

#include "errmsg.h"
#include "squashfs_format.h"

#define SQUASHFS_MAGIC 0x73717368u
#define SQUASHFS_MAGIC_SWAPPED 0x68737173u /* big-endian squashfs 1.x-3.x */
/* Flags squashfs 4.0 defines (uncompressed inodes, data, fragments and
 * xattrs, no fragments, always fragments, duplicates, exportable, no
 * xattrs, compressor options, and the unused check bit). */
#define KNOWN_FLAGS 0x07ffu

/* On-disk layout, little-endian, byte offsets from the start. */
enum {
	OFF_MAGIC = 0,
	OFF_INODES = 4,
	OFF_MKFS_TIME = 8,
	OFF_BLOCK_SIZE = 12,
	OFF_FRAGMENTS = 16,
	OFF_COMPRESSION = 20,
	OFF_BLOCK_LOG = 22,
	OFF_FLAGS = 24,
	OFF_NO_IDS = 26,
	OFF_MAJOR = 28,
	OFF_MINOR = 30,
	OFF_ROOT_INODE = 32,
	OFF_BYTES_USED = 40,
	OFF_ID_TABLE = 48,
	OFF_XATTR_TABLE = 56,
	OFF_INODE_TABLE = 64,
	OFF_DIRECTORY_TABLE = 72,
	OFF_FRAGMENT_TABLE = 80,
	OFF_EXPORT_TABLE = 88,
};

const char *squash_compression_name(uint16_t compression)
{
	static const char *const names[] = {
		[SQUASH_COMP_GZIP] = "gzip", [SQUASH_COMP_LZMA] = "lzma", [SQUASH_COMP_LZO] = "lzo",
		[SQUASH_COMP_XZ] = "xz",     [SQUASH_COMP_LZ4] = "lz4",   [SQUASH_COMP_ZSTD] = "zstd",
	};

	if (compression >= sizeof(names) / sizeof(names[0]) || !names[compression])
		return "unknown";
	return names[compression];
}

static void decode(const uint8_t *buf, struct squash_superblock *sb)
{
	sb->inodes = le32(buf + OFF_INODES);
	sb->mkfs_time = le32(buf + OFF_MKFS_TIME);
	sb->block_size = le32(buf + OFF_BLOCK_SIZE);
	sb->fragments = le32(buf + OFF_FRAGMENTS);
	sb->compression = le16(buf + OFF_COMPRESSION);
	sb->block_log = le16(buf + OFF_BLOCK_LOG);
	sb->flags = le16(buf + OFF_FLAGS);
	sb->no_ids = le16(buf + OFF_NO_IDS);
	sb->root_inode = le64(buf + OFF_ROOT_INODE);
	sb->bytes_used = le64(buf + OFF_BYTES_USED);
	sb->id_table = le64(buf + OFF_ID_TABLE);
	sb->xattr_table = le64(buf + OFF_XATTR_TABLE);
	sb->inode_table = le64(buf + OFF_INODE_TABLE);
	sb->directory_table = le64(buf + OFF_DIRECTORY_TABLE);
	sb->fragment_table = le64(buf + OFF_FRAGMENT_TABLE);
	sb->export_table = le64(buf + OFF_EXPORT_TABLE);
}

/* Where a SIF file's global header has its magic, NUL included. */
#define SIF_MAGIC_OFFSET 32
static const char SIF_MAGIC[10] = "SIF_MAGIC";

static int check_identity(const uint8_t *buf, char *err, size_t errlen)
{
	uint32_t magic = le32(buf + OFF_MAGIC);
	uint16_t major = le16(buf + OFF_MAJOR);
	uint16_t minor = le16(buf + OFF_MINOR);

	if (magic == SQUASHFS_MAGIC_SWAPPED) {
		squash_errf(err, errlen,
			    "big-endian squashfs (version 3 or older) is not supported (need 4.0)");
		return -1;
	}
	/* An Apptainer/Singularity SIF: a launch script line, then its magic.
	 * Its squashfs partition is a whole OS root, made to be run at '/'. */
	if (!memcmp(buf + SIF_MAGIC_OFFSET, SIF_MAGIC, sizeof(SIF_MAGIC))) {
		squash_errf(err, errlen,
			    "an Apptainer SIF file, not a squashfs image: run it with apptainer "
			    "exec; to use software from it here, copy its directory out "
			    "(apptainer build --sandbox) and pack that with squash-pack");
		return -1;
	}
	if (magic != SQUASHFS_MAGIC) {
		squash_errf(err, errlen, "not a squashfs image (bad magic)");
		return -1;
	}
	if (major != 4 || minor != 0) {
		squash_errf(err, errlen,
			    "squashfs version %u.%u is not supported (need 4.0)",
			    major, minor);
		return -1;
	}
	return 0;
}

static int check_block_size(const struct squash_superblock *sb, char *err, size_t errlen)
{
	if (sb->block_size < SQUASH_BLOCK_SIZE_MIN || sb->block_size > SQUASH_BLOCK_SIZE_MAX ||
	    (sb->block_size & (sb->block_size - 1)) != 0) {
		squash_errf(err, errlen, "block size %u is invalid", sb->block_size);
		return -1;
	}
	if (sb->block_log >= 32 || (UINT32_C(1) << sb->block_log) != sb->block_size) {
		squash_errf(err, errlen,
			    "block size %u is invalid (block_log is %u)",
			    sb->block_size, sb->block_log);
		return -1;
	}
	return 0;
}

static int check_compression_and_flags(const struct squash_superblock *sb, char *err,
				       size_t errlen)
{
	if (sb->compression < SQUASH_COMP_GZIP || sb->compression > SQUASH_COMP_ZSTD) {
		squash_errf(err, errlen, "unknown compression (id %u)", sb->compression);
		return -1;
	}
	if (sb->flags & ~KNOWN_FLAGS) {
		squash_errf(err, errlen, "image is corrupt: unknown superblock flags 0x%04x",
			    sb->flags & ~KNOWN_FLAGS);
		return -1;
	}
	return 0;
}

static int check_extent(const struct squash_superblock *sb, uint64_t file_size, char *err,
			size_t errlen)
{
	if (sb->bytes_used < SQUASH_SUPERBLOCK_SIZE) {
		squash_errf(err, errlen,
			    "image is corrupt: superblock says %llu bytes, less than the superblock itself",
			    (unsigned long long)sb->bytes_used);
		return -1;
	}
	if (sb->bytes_used > file_size) {
		squash_errf(err, errlen,
			    "image is truncated: superblock says %llu bytes, file has %llu",
			    (unsigned long long)sb->bytes_used,
			    (unsigned long long)file_size);
		return -1;
	}
	return 0;
}

static int check_tables(const struct squash_superblock *sb, char *err, size_t errlen)
{
	const struct {
		const char *name;
		uint64_t start;
		bool optional; /* may be SQUASH_TABLE_ABSENT */
	} tables[] = {
		{ "inode", sb->inode_table, false },
		{ "directory", sb->directory_table, false },
		{ "id", sb->id_table, false },
		/* With fragments, their table must be there. */
		{ "fragment", sb->fragment_table, sb->fragments == 0 },
		{ "export", sb->export_table, true },
		{ "xattr", sb->xattr_table, true },
	};

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		uint64_t start = tables[i].start;

		if (tables[i].optional && start == SQUASH_TABLE_ABSENT)
			continue;
		if (start < SQUASH_SUPERBLOCK_SIZE || start >= sb->bytes_used) {
			squash_errf(err, errlen,
				    "image is corrupt: %s table offset %llu is outside the image (%llu bytes)",
				    tables[i].name, (unsigned long long)start,
				    (unsigned long long)sb->bytes_used);
			return -1;
		}
	}
	/* Inodes are found from the inode table's start up to the directory
	 * table's, which mksquashfs writes right after it. */
	if (sb->inode_table >= sb->directory_table) {
		squash_errf(err, errlen,
			    "image is corrupt: the inode table does not come before the directory table");
		return -1;
	}
	if (sb->no_ids == 0) {
		squash_errf(err, errlen, "image is corrupt: no uid/gid table entries");
		return -1;
	}
	/* The kernel refuses a root inode whose offset lies past a metadata
	 * block; an offset of a whole block would start the next one. */
	if ((sb->root_inode & 0xffff) >= SQUASH_METADATA_SIZE ||
	    (sb->root_inode >> 16) >= sb->directory_table - sb->inode_table) {
		squash_errf(err, errlen, "image is corrupt: bad root inode");
		return -1;
	}
	return 0;
}

int squash_superblock_read(const uint8_t *buf, size_t len, uint64_t file_size,
			   struct squash_superblock *sb, char *err, size_t errlen)
{
	if (len < SQUASH_SUPERBLOCK_SIZE) {
		squash_errf(err, errlen,
			    "not a squashfs image (only %zu bytes, a superblock has %d)",
			    len, SQUASH_SUPERBLOCK_SIZE);
		return -1;
	}
	if (check_identity(buf, err, errlen) < 0)
		return -1;
	decode(buf, sb);
	if (check_block_size(sb, err, errlen) < 0 ||
	    check_compression_and_flags(sb, err, errlen) < 0 ||
	    check_extent(sb, file_size, err, errlen) < 0 ||
	    check_tables(sb, err, errlen) < 0)
		return -1;
	return 0;
}

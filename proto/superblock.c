#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "superblock.h"

#define SQUASHFS_MAGIC 0x73717368u
#define SQUASHFS_MAGIC_SWAPPED 0x68737173u /* big-endian squashfs 1.x-3.x */
#define TABLE_ABSENT UINT64_C(0xFFFFFFFFFFFFFFFF)
#define METADATA_BLOCK_SIZE 8192 /* bound of an inode reference's offset */
#define BLOCK_SIZE_MIN 4096
#define BLOCK_SIZE_MAX 1048576

/* On-disk layout, little-endian, byte offsets from the start. */
enum {
	OFF_MAGIC = 0,
	OFF_INODES = 4,
	OFF_BLOCK_SIZE = 12,
	OFF_COMPRESSION = 20,
	OFF_BLOCK_LOG = 22,
	OFF_MAJOR = 28,
	OFF_MINOR = 30,
	OFF_ROOT_INODE = 32,
	OFF_BYTES_USED = 40,
	OFF_ID_TABLE = 48,
	OFF_XATTR_TABLE = 56,
	OFF_INODE_TABLE = 64,
	OFF_DIRECTORY_TABLE = 72,
	OFF_FRAGMENT_TABLE = 80,
	OFF_LOOKUP_TABLE = 88,
};

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

const char *squash_compression_name(uint16_t compression)
{
	switch (compression) {
	case SQUASH_COMP_GZIP:
		return "gzip";
	case SQUASH_COMP_LZMA:
		return "lzma";
	case SQUASH_COMP_LZO:
		return "lzo";
	case SQUASH_COMP_XZ:
		return "xz";
	case SQUASH_COMP_LZ4:
		return "lz4";
	case SQUASH_COMP_ZSTD:
		return "zstd";
	default:
		return "unknown";
	}
}

static bool fuse_supports(uint16_t compression)
{
	/* Both FUSE readers (squash-reader, squashfuse_ll) decompress with
	 * libsquashfuse, which has every squashfs compressor but legacy lzma
	 * only when built with it (configure checks; Debian's is not). */
#ifndef SQUASHFUSE_HAS_LZMA
	if (compression == SQUASH_COMP_LZMA)
		return false;
#endif
	return compression >= SQUASH_COMP_GZIP && compression <= SQUASH_COMP_ZSTD;
}

static bool kernel_supports(uint16_t compression)
{
	/* Linux squashfs never gained the legacy lzma (not xz) decompressor. */
	return compression >= SQUASH_COMP_GZIP && compression <= SQUASH_COMP_ZSTD &&
	       compression != SQUASH_COMP_LZMA;
}

bool squash_compression_supported(uint16_t compression,
				  enum squash_reader reader)
{
	switch (reader) {
	case SQUASH_READER_FUSE:
		return fuse_supports(compression);
	case SQUASH_READER_KERNEL:
		return kernel_supports(compression);
	case SQUASH_READER_ANY:
		return fuse_supports(compression) || kernel_supports(compression);
	}
	return false;
}

static const char *reader_name(enum squash_reader reader)
{
	switch (reader) {
	case SQUASH_READER_FUSE:
		return "the FUSE reader";
	case SQUASH_READER_KERNEL:
		return "the kernel";
	default:
		return "this node";
	}
}

static int check_version(const uint8_t *buf, char *err, size_t errlen)
{
	uint16_t major = le16(buf + OFF_MAJOR);
	uint16_t minor = le16(buf + OFF_MINOR);

	if (major != 4 || minor != 0) {
		squash_errf(err, errlen,
			    "squashfs version %u.%u is not supported (need 4.0)",
			    major, minor);
		return -1;
	}
	return 0;
}

static int check_block_size(const uint8_t *buf, char *err, size_t errlen)
{
	uint32_t block_size = le32(buf + OFF_BLOCK_SIZE);
	uint16_t block_log = le16(buf + OFF_BLOCK_LOG);

	if (block_size < BLOCK_SIZE_MIN || block_size > BLOCK_SIZE_MAX ||
	    (block_size & (block_size - 1)) != 0) {
		squash_errf(err, errlen, "block size %u is invalid", block_size);
		return -1;
	}
	if (block_log >= 32 || (UINT32_C(1) << block_log) != block_size) {
		squash_errf(err, errlen,
			    "block size %u is invalid (block_log is %u)",
			    block_size, block_log);
		return -1;
	}
	return 0;
}

static int check_compression(const uint8_t *buf, enum squash_reader reader,
			     char *err, size_t errlen)
{
	uint16_t compression = le16(buf + OFF_COMPRESSION);

	if (compression < SQUASH_COMP_GZIP || compression > SQUASH_COMP_ZSTD) {
		squash_errf(err, errlen, "unknown compression (id %u)",
			    compression);
		return -1;
	}
	if (!squash_compression_supported(compression, reader) &&
	    compression == SQUASH_COMP_LZMA) {
		squash_errf(err, errlen,
			    "legacy lzma compression (mksquashfs -comp lzma) is not supported by %s: "
			    "repack the image with -comp xz",
			    reader_name(reader));
		return -1;
	}
	if (!squash_compression_supported(compression, reader)) {
		squash_errf(err, errlen,
			    "%s compression is not supported by %s",
			    squash_compression_name(compression),
			    reader_name(reader));
		return -1;
	}
	return 0;
}

static int check_extent(const uint8_t *buf, uint64_t file_size, char *err,
			size_t errlen)
{
	uint64_t bytes_used = le64(buf + OFF_BYTES_USED);

	if (bytes_used < SQUASH_SUPERBLOCK_SIZE) {
		squash_errf(err, errlen,
			    "image is corrupt: superblock says %llu bytes, less than the superblock itself",
			    (unsigned long long)bytes_used);
		return -1;
	}
	if (bytes_used > file_size) {
		squash_errf(err, errlen,
			    "image is truncated: superblock says %llu bytes, file has %llu",
			    (unsigned long long)bytes_used,
			    (unsigned long long)file_size);
		return -1;
	}
	return 0;
}

static int check_tables(const uint8_t *buf, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		size_t offset;
		bool optional; /* may be TABLE_ABSENT */
	} tables[] = {
		{ "inode", OFF_INODE_TABLE, false },
		{ "directory", OFF_DIRECTORY_TABLE, false },
		{ "id", OFF_ID_TABLE, false },
		{ "fragment", OFF_FRAGMENT_TABLE, true },
		{ "export", OFF_LOOKUP_TABLE, true },
		{ "xattr", OFF_XATTR_TABLE, true },
	};
	uint64_t bytes_used = le64(buf + OFF_BYTES_USED);
	size_t i;

	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		uint64_t start = le64(buf + tables[i].offset);

		if (tables[i].optional && start == TABLE_ABSENT)
			continue;
		if (start < SQUASH_SUPERBLOCK_SIZE || start >= bytes_used) {
			squash_errf(err, errlen,
				    "image is corrupt: %s table offset %llu is outside the image (%llu bytes)",
				    tables[i].name, (unsigned long long)start,
				    (unsigned long long)bytes_used);
			return -1;
		}
	}
	/* The kernel refuses a root inode reference whose offset lies past
	 * one metadata block. */
	if ((le64(buf + OFF_ROOT_INODE) & 0xFFFF) > METADATA_BLOCK_SIZE) {
		squash_errf(err, errlen, "image is corrupt: bad root inode");
		return -1;
	}
	return 0;
}

int squash_superblock_check(const uint8_t *buf, size_t len, uint64_t file_size,
			    enum squash_reader reader,
			    struct squash_superblock_info *info, char *err,
			    size_t errlen)
{
	uint32_t magic;

	if (len < SQUASH_SUPERBLOCK_SIZE) {
		squash_errf(err, errlen,
			    "not a squashfs image (only %zu bytes, a superblock has %d)",
			    len, SQUASH_SUPERBLOCK_SIZE);
		return -1;
	}
	magic = le32(buf + OFF_MAGIC);
	if (magic == SQUASHFS_MAGIC_SWAPPED) {
		squash_errf(err, errlen,
			    "big-endian squashfs (version 3 or older) is not supported (need 4.0)");
		return -1;
	}
	if (magic != SQUASHFS_MAGIC) {
		squash_errf(err, errlen, "not a squashfs image (bad magic)");
		return -1;
	}
	if (check_version(buf, err, errlen) < 0 ||
	    check_block_size(buf, err, errlen) < 0 ||
	    check_compression(buf, reader, err, errlen) < 0 ||
	    check_extent(buf, file_size, err, errlen) < 0 ||
	    check_tables(buf, err, errlen) < 0)
		return -1;
	if (info) {
		info->inodes = le32(buf + OFF_INODES);
		info->block_size = le32(buf + OFF_BLOCK_SIZE);
		info->compression = le16(buf + OFF_COMPRESSION);
		info->bytes_used = le64(buf + OFF_BYTES_USED);
	}
	return 0;
}

int squash_superblock_check_fd(int fd, enum squash_reader reader,
			       struct squash_superblock_info *info, char *err,
			       size_t errlen)
{
	uint8_t buf[SQUASH_SUPERBLOCK_SIZE];
	size_t got = 0;
	struct stat st;

	if (fstat(fd, &st) < 0) {
		squash_errf(err, errlen, "cannot stat image: %s", strerror(errno));
		return -1;
	}
	/* A FIFO or device could block or change under us; images are files. */
	if (!S_ISREG(st.st_mode)) {
		squash_errf(err, errlen, "not a regular file");
		return -1;
	}
	while (got < sizeof(buf)) {
		ssize_t n = pread(fd, buf + got, sizeof(buf) - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			squash_errf(err, errlen, "cannot read image: %s",
				    strerror(errno));
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return squash_superblock_check(buf, got, (uint64_t)st.st_size, reader,
				       info, err, errlen);
}

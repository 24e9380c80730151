/* The squashfs 4.0 superblock check, shared by the submit-time check in the
 * plugin and the authoritative check in squashd (which runs it on the
 * descriptor it opened with the user's rights). */
#ifndef SQUASH_SUPERBLOCK_H
#define SQUASH_SUPERBLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SQUASH_SUPERBLOCK_SIZE 96

enum squash_compression {
	SQUASH_COMP_GZIP = 1,
	SQUASH_COMP_LZMA = 2,
	SQUASH_COMP_LZO = 3,
	SQUASH_COMP_XZ = 4,
	SQUASH_COMP_LZ4 = 5,
	SQUASH_COMP_ZSTD = 6,
};

/* Who will read the image; each supports a set of compressions. */
enum squash_reader {
	SQUASH_READER_ANY = 0,    /* at least one of the two below */
	SQUASH_READER_FUSE = 1,   /* squash-reader or squashfuse_ll (libsquashfuse's codecs) */
	SQUASH_READER_KERNEL = 2, /* Linux squashfs */
};

struct squash_superblock_info {
	uint32_t inodes;
	uint32_t block_size;
	uint16_t compression;
	uint64_t bytes_used;
};

/* Checks the first SQUASH_SUPERBLOCK_SIZE bytes of an image whose file is
 * file_size bytes long: magic, version 4.0, block size a power of two from
 * 4 KiB to 1 MiB matching block_log, bytes_used within the file, every table
 * offset inside bytes_used, a known compression that `reader` supports.
 * Returns 0 (filling *info when not NULL) or -1 with a user-facing reason in
 * err (e.g. "not a squashfs image (bad magic)"). */
int squash_superblock_check(const uint8_t *buf, size_t len, uint64_t file_size,
			    enum squash_reader reader,
			    struct squash_superblock_info *info, char *err,
			    size_t errlen);

/* Reads the superblock from an open descriptor (pread at offset 0, fstat for
 * the size) and checks it as above. Anything but a regular file is refused
 * ("not a regular file"): a FIFO or device could block or change. */
int squash_superblock_check_fd(int fd, enum squash_reader reader,
			       struct squash_superblock_info *info, char *err,
			       size_t errlen);

bool squash_compression_supported(uint16_t compression,
				  enum squash_reader reader);
const char *squash_compression_name(uint16_t compression);

#endif

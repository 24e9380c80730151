#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "errmsg.h"
#include "read_full.h"
#include "superblock.h"

static bool fuse_supports(uint16_t compression)
{
	/* Every squashfs compressor, but legacy lzma only where libsquashfuse
	 * has it (configure checks; Debian 12's has not): squash-reader
	 * decodes it itself, squashfuse_ll (fuse_reader = squashfuse_ll) only
	 * through libsquashfuse. */
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

static int check_compression(uint16_t compression, enum squash_reader reader,
			     char *err, size_t errlen)
{
	if (squash_compression_supported(compression, reader))
		return 0;
	if (compression == SQUASH_COMP_LZMA)
		squash_errf(err, errlen,
			    "legacy lzma compression (mksquashfs -comp lzma) is not supported by %s: "
			    "repack the image with -comp xz",
			    reader_name(reader));
	else
		squash_errf(err, errlen, "%s compression is not supported by %s",
			    squash_compression_name(compression), reader_name(reader));
	return -1;
}

int squash_superblock_check(const uint8_t *buf, size_t len, uint64_t file_size,
			    enum squash_reader reader, struct squash_superblock *sb,
			    char *err, size_t errlen)
{
	struct squash_superblock read;

	if (squash_superblock_read(buf, len, file_size, &read, err, errlen) < 0 ||
	    check_compression(read.compression, reader, err, errlen) < 0)
		return -1;
	if (sb)
		*sb = read;
	return 0;
}

int squash_superblock_check_fd(int fd, enum squash_reader reader,
			       struct squash_superblock *sb, char *err,
			       size_t errlen)
{
	uint8_t buf[SQUASH_SUPERBLOCK_SIZE];
	struct stat st;
	ssize_t got;

	if (fstat(fd, &st) < 0) {
		squash_errf(err, errlen, "cannot stat image: %s", strerror(errno));
		return -1;
	}
	/* A FIFO or device could block or change under us; images are files. */
	if (!S_ISREG(st.st_mode)) {
		squash_errf(err, errlen, "not a regular file");
		return -1;
	}
	got = squash_read_full(fd, buf, sizeof(buf), 0);
	if (got < 0) {
		squash_errf(err, errlen, "cannot read image: %s", strerror(errno));
		return -1;
	}
	return squash_superblock_check(buf, (size_t)got, (uint64_t)st.st_size, reader,
				       sb, err, errlen);
}

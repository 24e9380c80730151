/* Whether an image can be mounted by a given reader: the superblock check
 * of squashfs_format.h plus the compressions each reader decodes. Shared by
 * the submit-time check in the plugin and the authoritative check in
 * squashd (which runs it on the descriptor it opened with the user's
 * rights). */
#ifndef SQUASH_SUPERBLOCK_H
#define SQUASH_SUPERBLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "squashfs_format.h"

/* Who will read the image; each supports a set of compressions. */
enum squash_reader {
	SQUASH_READER_ANY = 0,    /* at least one of the two below */
	SQUASH_READER_FUSE = 1,   /* squash-reader or squashfuse_ll, whichever squashd runs */
	SQUASH_READER_KERNEL = 2, /* Linux squashfs */
};

/* Checks the first SQUASH_SUPERBLOCK_SIZE bytes of an image whose file is
 * file_size bytes long (squash_superblock_read) and that `reader` supports
 * its compression. Returns 0 (filling *sb when not NULL) or -1 with a
 * user-facing reason in err (e.g. "not a squashfs image (bad magic)"). */
int squash_superblock_check(const uint8_t *buf, size_t len, uint64_t file_size,
			    enum squash_reader reader, struct squash_superblock *sb,
			    char *err, size_t errlen);

/* Reads the superblock from an open descriptor (pread at offset 0, fstat for
 * the size) and checks it as above. Anything but a regular file is refused
 * ("not a regular file"): a FIFO or device could block or change. */
int squash_superblock_check_fd(int fd, enum squash_reader reader,
			       struct squash_superblock *sb, char *err,
			       size_t errlen);

bool squash_compression_supported(uint16_t compression,
				  enum squash_reader reader);

#endif

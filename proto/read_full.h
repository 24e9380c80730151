/* Reading a whole range of a file: pread until it is all read, the file
 * ends or a real error comes (EINTR and short reads are retried). The one
 * read loop of the superblock checks and of squash-reader. */
#ifndef SQUASH_READ_FULL_H
#define SQUASH_READ_FULL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads up to len bytes at offset into buf. Returns the bytes read, fewer
 * than len only where the file ends, or -1 with errno set (EOVERFLOW for
 * an offset past what off_t holds). */
ssize_t squash_read_full(int fd, void *buf, size_t len, uint64_t offset);

#endif

#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include "read_full.h"

ssize_t squash_read_full(int fd, void *buf, size_t len, uint64_t offset)
{
	size_t got = 0;

	/* A hostile image may name any 64-bit offset; off_t is signed. */
	if (offset > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - offset ||
	    len > SSIZE_MAX) {
		errno = EOVERFLOW;
		return -1;
	}
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(offset + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

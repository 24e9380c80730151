#include "config.h"

#include "util/small_file.h"

#include <fcntl.h>
#include <unistd.h>

ssize_t small_file_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0 || len == 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

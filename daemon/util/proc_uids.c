#include "config.h"

#include "util/proc_uids.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool proc_uids_are(int proc_dir, uid_t uid)
{
	char buf[4096], *line;
	unsigned long r, e, s;
	int fd = openat(proc_dir, "status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	line = strstr(buf, "\nUid:");
	return line && sscanf(line + 5, "%lu %lu %lu", &r, &e, &s) == 3 && r == uid && e == uid &&
	       s == uid;
}

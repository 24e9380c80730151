#include "config.h"

#include "util/proc_uids.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The real, effective and saved uids; false when status cannot be read. */
static bool read_uids(int proc_dir, unsigned long *r, unsigned long *e, unsigned long *s)
{
	char buf[4096], *line;
	int fd = openat(proc_dir, "status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	line = strstr(buf, "\nUid:");
	return line && sscanf(line + 5, "%lu %lu %lu", r, e, s) == 3;
}

bool proc_uids_are(int proc_dir, uid_t uid)
{
	unsigned long r, e, s;

	return read_uids(proc_dir, &r, &e, &s) && r == uid && e == uid && s == uid;
}

bool proc_uids_owner(int proc_dir, uid_t *uid)
{
	unsigned long r, e, s;

	if (!read_uids(proc_dir, &r, &e, &s))
		return false;
	*uid = (uid_t)(r ? r : e ? e : s);
	return true;
}

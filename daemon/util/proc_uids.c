#include "config.h"

#include "util/proc_uids.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The real, effective and saved uids, and the parent's pid; false when
 * status cannot be read. */
static bool read_status(int proc_dir, unsigned long *r, unsigned long *e, unsigned long *s, long *ppid)
{
	char buf[4096], *line;
	int fd = openat(proc_dir, "status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	line = strstr(buf, "\nPPid:");
	*ppid = line ? strtol(line + 6, NULL, 10) : 0;
	line = strstr(buf, "\nUid:");
	return line && sscanf(line + 5, "%lu %lu %lu", r, e, s) == 3;
}

bool proc_uids_are(int proc_dir, uid_t uid)
{
	unsigned long r, e, s;
	long ppid;

	return read_status(proc_dir, &r, &e, &s, &ppid) && r == uid && e == uid && s == uid;
}

bool proc_uids_are_with_parent(int proc_dir, uid_t uid, pid_t *ppid)
{
	unsigned long r, e, s;
	long parent;

	if (!read_status(proc_dir, &r, &e, &s, &parent) || r != uid || e != uid || s != uid)
		return false;
	*ppid = parent > 0 && parent <= INT32_MAX ? (pid_t)parent : 0;
	return true;
}

bool proc_uids_owner(int proc_dir, uid_t *uid)
{
	unsigned long r, e, s;
	long ppid;

	if (!read_status(proc_dir, &r, &e, &s, &ppid))
		return false;
	*uid = (uid_t)(r ? r : e ? e : s);
	return true;
}

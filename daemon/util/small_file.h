/* Reading a small text file of the kernel's (/proc/PID/stat, cgroup
 * files) in one read: such files are written whole by the kernel at
 * read(2), so one call sees a consistent text. */
#ifndef SQUASHD_SMALL_FILE_H
#define SQUASHD_SMALL_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Reads up to len - 1 bytes of path into buf and ends them with '\0'.
 * Returns the length, or -1 (cannot open, read error or empty file). */
ssize_t small_file_read(const char *path, char *buf, size_t len);

#endif

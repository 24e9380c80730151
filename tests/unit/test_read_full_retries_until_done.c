/* The one read loop (proto/read_full.c, squash_read_full): it reads on
 * through short reads and EINTR, stops only where the file ends, and
 * reports a real error or an offset off_t cannot hold. pread is wrapped
 * (-Wl,--wrap=pread, tests/Makefile.am) to hand out one byte at a time
 * and fail every other call with EINTR, as a signal-interrupted read of a
 * network filesystem may. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "read_full.h"
#include "unit.h"

ssize_t __real_pread(int fd, void *buf, size_t len, off_t offset);
ssize_t __wrap_pread(int fd, void *buf, size_t len, off_t offset);

static bool stingy;
static unsigned calls;

ssize_t __wrap_pread(int fd, void *buf, size_t len, off_t offset)
{
	calls++;
	if (!stingy)
		return __real_pread(fd, buf, len, offset);
	if (calls % 2) {
		errno = EINTR;
		return -1;
	}
	return __real_pread(fd, buf, len > 0 ? 1 : 0, offset);
}

static int temp_file(const char *text)
{
	char path[] = "/tmp/test_read_full.XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	unlink(path);
	CHECK_INT(write(fd, text, strlen(text)), (long long)strlen(text));
	return fd;
}

static void test_short_reads_and_eintr_are_read_through(void)
{
	int fd = temp_file("0123456789abcdef");
	char buf[16] = { 0 };

	stingy = true;
	calls = 0;
	CHECK_INT(squash_read_full(fd, buf, 10, 3), 10);
	CHECK(memcmp(buf, "3456789abc", 10) == 0);
	CHECK(calls >= 20);
	stingy = false;
	close(fd);
}

static void test_it_stops_where_the_file_ends(void)
{
	int fd = temp_file("0123456789");
	char buf[32];

	CHECK_INT(squash_read_full(fd, buf, sizeof(buf), 4), 6);
	CHECK(memcmp(buf, "456789", 6) == 0);
	CHECK_INT(squash_read_full(fd, buf, sizeof(buf), 10), 0);
	CHECK_INT(squash_read_full(fd, buf, sizeof(buf), 1000), 0);
	CHECK_INT(squash_read_full(fd, buf, 0, 0), 0);
	close(fd);
}

static void test_errors_and_impossible_offsets_are_reported(void)
{
	int fd = temp_file("x");
	char buf[8];

	errno = 0;
	CHECK_INT(squash_read_full(-1, buf, sizeof(buf), 0), -1);
	CHECK_INT(errno, EBADF);
	/* An offset a hostile image may name: past what off_t holds. */
	errno = 0;
	CHECK_INT(squash_read_full(fd, buf, sizeof(buf), UINT64_MAX - 2), -1);
	CHECK_INT(errno, EOVERFLOW);
	errno = 0;
	CHECK_INT(squash_read_full(fd, buf, sizeof(buf), (uint64_t)INT64_MAX - 3), -1);
	CHECK_INT(errno, EOVERFLOW);
	close(fd);
}

int main(void)
{
	test_short_reads_and_eintr_are_read_through();
	test_it_stops_where_the_file_ends();
	test_errors_and_impossible_offsets_are_reported();
	return unit_exit_code();
}

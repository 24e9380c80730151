/* A mount table's devices by mount id (daemon/mount/mount_devs.c): every
 * line read and found by id; a read past its deadline stops, says so, and
 * returns what it read (an adoption's walk of a reader whose user filled
 * their namespace's table: mount/fuse_keep_adopt.c). No root needed. */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mount/mount_devs.h"
#include "unit.h"

#define LINES 1000

int main(void)
{
	char path[] = "/tmp/test_mount_devs.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	struct mount_dev *devs;
	size_t n;
	bool late;

	CHECK(f != NULL);
	if (!f)
		return unit_exit_code();
	/* Ids in reverse order: the result is sorted by id. */
	for (unsigned i = LINES; i > 0; i--)
		fprintf(f, "%u 1 0:%u / /tmp/m%u rw,relatime shared:1 - tmpfs tmpfs rw\n", 100 + i, i, i);
	fclose(f);

	devs = mount_devs(path, &n, LLONG_MAX, &late);
	CHECK(!late);
	CHECK_INT(n, LINES);
	CHECK(devs && devs[0].id == 101 && devs[n - 1].id == 100 + LINES);
	CHECK(mount_dev(devs, n, 100 + 7) == makedev(0, 7));
	CHECK(mount_dev(devs, n, 5) == 0);
	free(devs);

	/* Past its deadline: stopped within 256 lines, what was read kept. */
	devs = mount_devs(path, &n, 0, &late);
	CHECK(late);
	CHECK(n > 0 && n < 256);
	CHECK(mount_dev(devs, n, 100 + LINES) == makedev(0, LINES));
	free(devs);

	/* No table: nothing, not late. */
	devs = mount_devs("/nonexistent/mountinfo", &n, LLONG_MAX, &late);
	CHECK(!late);
	CHECK_INT(n, 0);
	free(devs);
	unlink(path);
	return unit_exit_code();
}

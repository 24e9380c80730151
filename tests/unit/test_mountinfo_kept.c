/* squashd's own lines of a mountinfo that users made larger than any
 * fixed read (daemon/util/mountinfo_kept.c): 300 FUSE mounts of a user's
 * with 4 KiB mount points of spaces (16 KiB a line, escaped), then
 * squashd's mounts and a cgroup file system; the kept text holds exactly
 * the lines asked for, whole, and every line is visited. No root needed. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/mountinfo_kept.h"
#include "unit.h"

static int count(const struct squash_mount *m, void *arg)
{
	(void)m;
	(*(unsigned *)arg)++;
	return 0;
}

static bool is_cgroup2(const struct squash_mount *m, void *unused)
{
	(void)unused;
	return !strcmp(m->fstype, "cgroup2");
}

int main(void)
{
	char path[] = "/tmp/test_mountinfo_kept.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	char *spaces = malloc(4 * 4096 + 1);

	if (!f || !spaces)
		return 99;
	spaces[0] = '\0';
	for (int i = 0; i < 1000; i++)
		strcat(spaces, "\\040");
	for (int i = 0; i < 300; i++)
		fprintf(f, "%d 1 0:%d / /home/u/%s%d rw,nosuid - fuse.sshfs u@h:/ rw\n", 100 + i, 100 + i,
			spaces, i);
	fprintf(f, "900 1 0:900 / /run/squashd/mnt rw - tmpfs tmpfs rw\n");
	fprintf(f, "901 900 0:901 / /run/squashd/mnt/m1 ro - fuse.squashfuse squashfuse ro\n");
	fprintf(f, "902 1 0:902 / /run/squashd/mntx ro - tmpfs tmpfs ro\n");
	fprintf(f, "903 1 0:903 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	fclose(f);

	char *kept = mountinfo_kept(path, mountinfo_below, (void *)"/run/squashd/mnt");
	CHECK(kept != NULL);
	CHECK_STR(kept ? kept : "", "900 1 0:900 / /run/squashd/mnt rw - tmpfs tmpfs rw\n"
				    "901 900 0:901 / /run/squashd/mnt/m1 ro - fuse.squashfuse squashfuse ro\n");
	free(kept);
	kept = mountinfo_kept(path, is_cgroup2, NULL);
	CHECK_STR(kept ? kept : "", "903 1 0:903 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	free(kept);

	unsigned n = 0;
	CHECK_INT(mountinfo_each(path, count, &n), 0);
	CHECK_INT(n, 304);
	CHECK_INT(mountinfo_each("/nonexistent/mountinfo", count, &n), -1);
	CHECK(mountinfo_kept("/nonexistent/mountinfo", is_cgroup2, NULL) == NULL);

	unlink(path);
	free(spaces);
	return unit_exit_code();
}

/* squash-reader finds names in a large directory through the index
 * squashfs stores for it (daemon/reader/image_dir.c, dir_lookup): in a
 * directory of 20,000 entries every name is found, with the inode the
 * listing gives it, and names that are not there (before the first,
 * between two, after the last, prefixes of present names) are not. Under
 * ASan (the sanitizer build runs the same tests, for memory errors, not
 * for the index's reach) a directory of 4,000 entries, still indexed.
 * Skips (77) without mksquashfs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reader/image.h"
#include "unit.h"

#ifdef __SANITIZE_ADDRESS__
#define ENTRIES 4000
#else
#define ENTRIES 20000
#endif

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Names of several lengths, so that index entries and headers fall at
 * varied places. */
static void name_of(int i, char *buf, size_t len)
{
	snprintf(buf, len, "e%05d%.*s", i, i % 23, "-abcdefghijklmnopqrstuvw");
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void check_image(const char *img, const char *what)
{
	static uint64_t ids[ENTRIES];
	struct image *im = NULL;
	struct inode root, dir;
	struct dir_iter it;
	struct dir_entry e;
	char err[256], name[64];
	uint64_t id;
	int fd = open(img, O_RDONLY), n = 0, found = 0, r;
	double t0;

	CHECK_INT(image_open(fd, 0, 0, &im, err, sizeof(err)), 0);
	if (!im) {
		close(fd);
		return;
	}
	CHECK_INT(inode_get(im, image_root(im), &root), 0);
	CHECK_INT(dir_lookup(im, &root, "big", &id), 0);
	CHECK_INT(inode_get(im, id, &dir), 0);
	CHECK(dir.dir_index > ENTRIES / 1000); /* the listing spans many metadata blocks */

	/* The listing, in order: the ids lookups must give. */
	CHECK_INT(dir_open(im, &dir, 0, &it), 0);
	while ((r = dir_next(im, &it, &e)) > 0 && n < ENTRIES) {
		name_of(n, name, sizeof(name));
		CHECK_STR(e.name, name);
		ids[n++] = e.id;
	}
	CHECK_INT(r, 0);
	CHECK_INT(n, ENTRIES);

	t0 = now();
	for (int i = 0; i < ENTRIES; i++) {
		name_of(i, name, sizeof(name));
		r = dir_lookup(im, &dir, name, &id);
		if (r == 0 && id == ids[i])
			found++;
		else
			fprintf(stderr, "%s: %s: %d\n", what, name, r);
	}
	CHECK_INT(found, ENTRIES);
	fprintf(stderr, "%s: %d names found in %.0f ms (index of %u entries)\n", what, found,
		(now() - t0) * 1e3, dir.dir_index);

	/* Absent: before the first, after the last, between neighbours, a
	 * prefix of a present name, one a byte longer. */
	CHECK_INT(dir_lookup(im, &dir, "a", &id), -ENOENT);
	CHECK_INT(dir_lookup(im, &dir, "e", &id), -ENOENT);
	CHECK_INT(dir_lookup(im, &dir, "zzz", &id), -ENOENT);
	CHECK_INT(dir_lookup(im, &dir, "e99999", &id), -ENOENT);
	for (int i = 0; i < ENTRIES; i += 7) {
		char absent[80];

		name_of(i, name, sizeof(name));
		snprintf(absent, sizeof(absent), "%s~", name); /* after it, before the next */
		CHECK_INT(dir_lookup(im, &dir, absent, &id), -ENOENT);
		name[strlen(name) - 1] = '\0';
		if (i % 23 > 1) /* (a shorter name that is not another entry's) */
			CHECK_INT(dir_lookup(im, &dir, name, &id), -ENOENT);
	}
	image_close(im);
	close(fd);
}

int main(void)
{
	char dir[64], path[256], cmd[1024];

	if (sh("command -v mksquashfs >/dev/null") != 0) {
		fprintf(stderr, "SKIP: mksquashfs not installed\n");
		return 77;
	}
	/* In memory where there is a tmpfs: 20,000 files are made and removed
	 * several times faster there than on a disk. */
	snprintf(dir, sizeof(dir), "%s/test-dir-index-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/tree/big", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", path);
	CHECK_INT(sh(cmd), 0);
	for (int i = 0; i < ENTRIES; i++) {
		char name[64], p[512];
		int f;

		name_of(i, name, sizeof(name));
		snprintf(p, sizeof(p), "%s/%s", path, name);
		f = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
		CHECK(f >= 0);
		if (f >= 0)
			close(f);
	}
	snprintf(cmd, sizeof(cmd),
		 "cd %s && mksquashfs tree zstd.sqfs -comp zstd -noappend -quiet -no-progress >/dev/null",
		 dir);
	CHECK_INT(sh(cmd), 0);
	snprintf(path, sizeof(path), "%s/zstd.sqfs", dir);
	check_image(path, "zstd");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
	return unit_exit_code();
}

/* Walking a user's path one component at a time (proto/user_fuse_walk.c)
 * lands where open(2) lands: the same inode for plain paths, relative and
 * absolute symbolic links on the way, chains of them, "." and "..",
 * repeated and trailing slashes, a procfs link; the same errors (ENOENT,
 * ENOTDIR, ELOOP for a loop), and a last component that is a link is
 * said to be one (open gives the link itself). Mounts it refuses (a user's FUSE server) are the
 * integration tests' (test_images_on_a_users_fuse_mount.py). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"
#include "user_fuse_walk.h"

static char top[64];

/* The walk and open(O_PATH | O_NOFOLLOW) agree on rel (under top). */
static void same_as_open(const char *rel)
{
	char path[512], why[256];
	struct stat a, b;
	bool link;
	int fw, fo, ew, eo;

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	fw = squash_open_beside_user_fuse(path, true, &link, why, sizeof(why));
	ew = errno;
	fo = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	eo = errno;
	if (fo < 0 && eo == ELOOP) {
		/* A loop on the way: no last link. */
		CHECK(fw < 0 && ew == ELOOP && !link);
		return;
	}
	if (fo < 0) {
		CHECK(fw < 0);
		if (fw < 0 && ew != eo)
			fprintf(stderr, "%s: walk errno %d, open errno %d\n", rel, ew, eo);
		CHECK_INT(ew, eo);
		CHECK(!link);
		return;
	}
	if (fstat(fo, &b) == 0 && S_ISLNK(b.st_mode)) {
		/* open gives the link itself; the walk says it is one. */
		CHECK(fw < 0 && ew == ELOOP && link);
		close(fo);
		return;
	}
	CHECK(fw >= 0);
	CHECK(!link);
	CHECK_INT(why[0], 0);
	if (fw >= 0 && fstat(fw, &a) == 0 && fstat(fo, &b) == 0) {
		if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
			fprintf(stderr, "%s: the walk and open reached different inodes\n", rel);
		CHECK(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	}
	if (fw >= 0)
		close(fw);
	close(fo);
}

int main(void)
{
	static const char *const paths[] = {
		"d/f", "d//f", "./d/./f", "d/../d/f", "d/", "d/f/", "d/missing", "d/f/x",
		"abs/f", "rel/f", "chain/f", "rel", "abs", "loop/f", "loop", "d/up/d/f",
		"dangling", "dangling/x", "", "rel/../d/f", "self/fd",
	};
	char cmd[1024];

	snprintf(top, sizeof(top), "/tmp/test-user-fuse-walk.XXXXXX");
	if (!mkdtemp(top)) {
		CHECK(!"mkdtemp");
		return unit_exit_code();
	}
	snprintf(cmd, sizeof(cmd),
		 "cd %s && mkdir d && echo x > d/f && ln -s %s/d abs && ln -s d rel && ln -s rel chain && "
		 "ln -s loop2 loop && ln -s loop loop2 && ln -s .. d/up && ln -s nowhere dangling && "
		 "ln -s /proc/self self",
		 top, top);
	CHECK_INT(system(cmd), 0);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		same_as_open(paths[i]);
	/* A relative path, from the working directory. */
	{
		char why[256];
		bool link;
		int fd;

		CHECK_INT(chdir(top), 0);
		fd = squash_open_beside_user_fuse("rel/f", true, &link, why, sizeof(why));
		CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
		CHECK_INT(chdir("/"), 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	CHECK_INT(system(cmd), 0);
	return unit_exit_code();
}

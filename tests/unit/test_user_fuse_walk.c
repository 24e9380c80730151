/* Walking a user's path one component at a time (proto/user_fuse_walk.c)
 * lands where open(2) lands: the same inode for plain paths, relative and
 * absolute symbolic links on the way, chains of them, "." and "..",
 * repeated and trailing slashes, a procfs link; the same errors (ENOENT,
 * ENOTDIR, ELOOP for a loop), and a last component that is a link is
 * said to be one (open gives the link itself). Mounts it refuses (a user's FUSE server) are the
 * integration tests' (test_images_on_a_users_fuse_mount.py). Mounts found
 * fit are remembered by unique id and then taken as fit without a look
 * at mountinfo (Linux 6.8 on). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "user_fuse.h"
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
	fw = squash_open_beside_user_fuse(path, true, &link, NULL, why, sizeof(why));
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

/* A walk remembers the plain mount it found fit, and takes a mount it
 * remembers as fit: shown with a tmpfs of another mount namespace (reached
 * through /proc/PID/root), which mountinfo cannot tell and the walk
 * refuses, until its unique id is among the fit ones. */
static void fit_mounts_are_remembered_and_trusted(void)
{
	char path[512], why[256], dir[64] = "/tmp/test-fit-mounts.XXXXXX";
	struct squash_fit_mounts fit = { .n = 0 };
	bool link;
	int fd, ready[2];

	snprintf(path, sizeof(path), "%s/d/f", top);
	fd = squash_open_beside_user_fuse(path, true, &link, &fit, why, sizeof(why));
	CHECK(fd >= 0);
	uint64_t here = fd >= 0 ? squash_mount_unique_id(fd) : 0;
	if (fd >= 0)
		close(fd);
	if (!here) {
		printf("# no unique mount ids (Linux 6.8 on): nothing is remembered\n");
		CHECK_INT(fit.n, 0);
		return;
	}
	CHECK_INT(fit.n, 1);
	CHECK(squash_fit_mounts_has(&fit, here));
	if (geteuid() != 0 || !mkdtemp(dir) || pipe(ready) < 0) {
		printf("# not root: the other namespace's mount is not tried\n");
		return;
	}
	pid_t child = fork();
	if (child == 0) {
		char ok = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
			  mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0;
		if (ok) {
			char file[128];
			snprintf(file, sizeof(file), "%s/image", dir);
			FILE *f = fopen(file, "w");
			ok = f && fputs("x", f) >= 0 && fclose(f) == 0;
		}
		(void)!write(ready[1], &ok, 1);
		pause();
		_exit(0);
	}
	char ok = 0;
	close(ready[1]);
	CHECK(child > 0 && read(ready[0], &ok, 1) == 1 && ok);
	close(ready[0]);
	snprintf(path, sizeof(path), "/proc/%d/root%s/image", (int)child, dir);
	fd = squash_open_beside_user_fuse(path, true, &link, &fit, why, sizeof(why));
	CHECK(fd < 0 && strstr(why, "mount of another mount namespace") != NULL);
	/* The mounts on the way there: that namespace's copies of the
	 * node's (its root first: a mount of its own in a test root), then
	 * its tmpfs. */
	char part[512];
	snprintf(part, sizeof(part), "/proc/%d/root", (int)child);
	for (const char *p = dir;; p = strchr(p + 1, '/')) {
		size_t at = strlen(part);
		int there = open(part, O_PATH | O_CLOEXEC);

		CHECK(there >= 0);
		squash_fit_mounts_add(&fit, there >= 0 ? squash_mount_unique_id(there) : 0);
		if (there >= 0)
			close(there);
		snprintf(part + at, sizeof(part) - at, "%.*s", (int)(p ? strcspn(p + 1, "/") + 1 : 0), p ? p : "");
		there = open(part, O_PATH | O_CLOEXEC);
		CHECK(there >= 0);
		squash_fit_mounts_add(&fit, there >= 0 ? squash_mount_unique_id(there) : 0);
		if (there >= 0)
			close(there);
		if (!p)
			break;
	}
	fd = squash_open_beside_user_fuse(path, true, &link, &fit, why, sizeof(why));
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	rmdir(dir);
}

/* The oldest remembered mount makes room for a new one. */
static void fit_mounts_keep_the_newest(void)
{
	struct squash_fit_mounts fit = { .n = 0 };

	for (uint64_t id = 1; id <= SQUASH_FIT_MOUNTS_MAX + 2; id++)
		squash_fit_mounts_add(&fit, id);
	CHECK_INT(fit.n, SQUASH_FIT_MOUNTS_MAX);
	CHECK(!squash_fit_mounts_has(&fit, 1) && !squash_fit_mounts_has(&fit, 2));
	CHECK(squash_fit_mounts_has(&fit, 3) && squash_fit_mounts_has(&fit, SQUASH_FIT_MOUNTS_MAX + 2));
	squash_fit_mounts_add(&fit, 5); /* already held: nothing moves */
	CHECK(squash_fit_mounts_has(&fit, 3));
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
		fd = squash_open_beside_user_fuse("rel/f", true, &link, NULL, why, sizeof(why));
		CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
		CHECK_INT(chdir("/"), 0);
	}
	fit_mounts_are_remembered_and_trusted();
	fit_mounts_keep_the_newest();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	CHECK_INT(system(cmd), 0);
	return unit_exit_code();
}

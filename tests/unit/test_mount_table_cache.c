/* The mount table kept between questions (proto/mount_table_cache.c): read
 * once while the namespace's mounts stay the same, again after a mount or
 * an unmount (a mount id may be reused once its mount is gone), read
 * by a forked child on its own, and never under a lock another caller
 * waits for (one inside its use holds no other). Runs in a private mount namespace of its
 * own (root: skipped otherwise). */
#define _GNU_SOURCE
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "user_fuse.h"
#include "mount_table_cache.h"
#include "unit.h"

static uint64_t mount_id_of(const char *path)
{
	char why[256];
	int fd = open(path, O_PATH | O_CLOEXEC);
	uint64_t id = fd >= 0 ? squash_mount_id(fd, why, sizeof(why)) : 0;

	if (fd >= 0)
		close(fd);
	return id;
}

/* Whether the trusted walk may enter mount id; and the reads it took. */
static bool fuse_and_reads(uint64_t id, unsigned long *reads)
{
	char why[1024];
	unsigned long before = squash_mount_table_cache_reads();
	bool fuse = squash_mount_reaches_fuse(id, why, sizeof(why));

	*reads = squash_mount_table_cache_reads() - before;
	return fuse;
}

static atomic_bool slow_inside, slow_go;
static bool quick_fresh;

/* Stays inside its use of the table until told (at most 10 s). */
static int stay(const struct squash_mount_table *t, void *arg)
{
	(void)t;
	(void)arg;
	atomic_store(&slow_inside, true);
	for (int i = 0; i < 10000 && !atomic_load(&slow_go); i++)
		usleep(1000);
	return 0;
}

static int leave(const struct squash_mount_table *t, void *arg)
{
	(void)arg;
	return t->count > 0 ? 1 : -1;
}

static void *slow_caller(void *arg)
{
	char why[256];

	(void)arg;
	squash_mount_table_cached(false, stay, NULL, why, sizeof(why));
	return NULL;
}

static void *quick_caller(void *arg)
{
	char why[256];

	(void)arg;
	CHECK_INT(squash_mount_table_cached(quick_fresh, leave, NULL, why, sizeof(why)), 1);
	return NULL;
}

int main(void)
{
	char a[] = "/tmp/mtcache-a.XXXXXX", b[] = "/tmp/mtcache-b.XXXXXX";
	unsigned long reads;

	if (unshare(CLONE_NEWNS) < 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0) {
		UNIT_SKIP("no mount namespace of its own (not root?)");
		return unit_exit_code();
	}
	if (!mkdtemp(a) || !mkdtemp(b) || mount("mtcache", a, "tmpfs", 0, "size=1m") < 0) {
		UNIT_SKIP("cannot mount a tmpfs");
		return unit_exit_code();
	}
	uint64_t id_a = mount_id_of(a);
	CHECK(id_a != 0);

	/* The first question reads; the next ones use what was read. */
	CHECK(!fuse_and_reads(id_a, &reads));
	CHECK_INT(reads, 1);
	CHECK(!fuse_and_reads(id_a, &reads));
	CHECK_INT(reads, 0);
	CHECK(!fuse_and_reads(id_a, &reads));
	CHECK_INT(reads, 0);

	/* A mount: read again, once; its own id is then known. */
	CHECK(mount("mtcache", b, "tmpfs", 0, "size=1m") == 0);
	uint64_t id_b = mount_id_of(b);
	CHECK(!fuse_and_reads(id_a, &reads));
	CHECK_INT(reads, 1);
	CHECK(!fuse_and_reads(id_b, &reads));
	CHECK_INT(reads, 0);

	/* An unmount: read again; the gone mount's id is refused (not
	 * listed), after a second, fresh look. */
	CHECK(umount(b) == 0);
	CHECK(fuse_and_reads(id_b, &reads));
	CHECK_INT(reads, 2);
	CHECK(!fuse_and_reads(id_a, &reads));
	CHECK_INT(reads, 0);

	/* A forked child reads its own table (it must never take a lock its
	 * parent's threads held at the fork), and its answer is the same. */
	pid_t pid = fork();
	if (pid == 0) {
		bool fuse = fuse_and_reads(id_a, &reads);
		_exit(!fuse && reads == 1 ? 0 : 1);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* A caller inside its use of the table (or reading a long one) holds
	 * no other: a second caller is answered meanwhile, kept table or
	 * fresh read alike. */
	for (int fresh = 0; fresh < 2; fresh++) {
		pthread_t slow, quick;
		struct timespec until;

		atomic_store(&slow_inside, false);
		atomic_store(&slow_go, false);
		CHECK(pthread_create(&slow, NULL, slow_caller, NULL) == 0);
		while (!atomic_load(&slow_inside))
			usleep(1000);
		quick_fresh = fresh;
		CHECK(pthread_create(&quick, NULL, quick_caller, NULL) == 0);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 3;
		int joined = pthread_timedjoin_np(quick, NULL, &until);
		CHECK_INT(joined, 0);
		atomic_store(&slow_go, true);
		pthread_join(slow, NULL);
		if (joined != 0)
			pthread_join(quick, NULL);
	}

	umount(a);
	rmdir(a);
	rmdir(b);
	return unit_exit_code();
}

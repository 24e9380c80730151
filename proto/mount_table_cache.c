/* This process's mount table, read again only on change
 * (mount_table_cache.h). */
#include "config.h"

#include "mount_table_cache.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <unistd.h>

#define MOUNTINFO "/proc/self/mountinfo"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic pid_t owner; /* the process whose cache this is (0: none yet) */
static int watch_fd = -1;   /* polled for changes; never read */
static struct squash_mount_table table;
static bool have;
static atomic_ulong reads;

static int read_table(struct squash_mount_table *t, char *why, size_t whylen)
{
	atomic_fetch_add(&reads, 1);
	return squash_mount_table_read(MOUNTINFO, t, why, whylen);
}

/* Whether the namespace's mounts changed since the last poll (or cannot
 * be told). */
static bool changed(void)
{
	struct pollfd p = { .fd = watch_fd, .events = POLLPRI };

	if (watch_fd < 0)
		return true;
	return poll(&p, 1, 0) != 0 && (p.revents & (POLLPRI | POLLERR | POLLNVAL));
}

int squash_mount_table_cached(bool fresh, int (*use)(const struct squash_mount_table *t, void *arg),
			      void *arg, char *why, size_t whylen)
{
	pid_t me = getpid(), first = 0;
	int rc;

	/* Claimed before the lock is taken: a child forked after that sees
	 * another owner and never takes the lock another thread held at the
	 * fork. */
	if (!atomic_compare_exchange_strong(&owner, &first, me) && first != me) {
		struct squash_mount_table own;

		if (read_table(&own, why, whylen) < 0)
			return -1;
		rc = use(&own, arg);
		squash_mount_table_free(&own);
		return rc;
	}
	pthread_mutex_lock(&lock);
	if (watch_fd < 0)
		watch_fd = open(MOUNTINFO, O_RDONLY | O_CLOEXEC);
	/* Polled before the read: a change after it is seen next time. */
	if (changed() || fresh || !have) {
		if (have)
			squash_mount_table_free(&table);
		have = read_table(&table, why, whylen) == 0;
	}
	rc = have ? use(&table, arg) : -1;
	pthread_mutex_unlock(&lock);
	return rc;
}

unsigned long squash_mount_table_cache_reads(void)
{
	return atomic_load(&reads);
}

/* This process's mount table, read again only on change
 * (mount_table_cache.h). */
#include "config.h"

#include "mount_table_cache.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define MOUNTINFO "/proc/self/mountinfo"

/* A table read, shared by the callers that use it. */
struct snapshot {
	struct squash_mount_table t;
	unsigned refs; /* under lock */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* held for no read, no use */
static _Atomic pid_t owner; /* the process whose cache this is (0: none yet) */
static int watch_fd = -1;   /* polled for changes; never read */
static struct snapshot *current; /* NULL: none, or a change was seen since */
static unsigned long generation; /* changes seen: a read older than one is not kept */
static atomic_ulong reads;

static int read_table(struct squash_mount_table *t, char *why, size_t whylen)
{
	atomic_fetch_add(&reads, 1);
	return squash_mount_table_read(MOUNTINFO, t, why, whylen);
}

/* Whether the namespace's mounts changed since the last poll (or cannot
 * be told). A poll that says so says it once: whoever sees it drops the
 * kept table for everyone. */
static bool changed(void)
{
	struct pollfd p = { .fd = watch_fd, .events = POLLPRI };

	if (watch_fd < 0)
		return true;
	return poll(&p, 1, 0) != 0 && (p.revents & (POLLPRI | POLLERR | POLLNVAL));
}

/* Under lock. */
static void put_locked(struct snapshot *s)
{
	if (s && --s->refs == 0) {
		squash_mount_table_free(&s->t);
		free(s);
	}
}

int squash_mount_table_cached(bool fresh, int (*use)(const struct squash_mount_table *t, void *arg),
			      void *arg, char *why, size_t whylen)
{
	pid_t me = getpid(), first = 0;
	struct snapshot *s = NULL;
	unsigned long seen;
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
	/* Polled before any read: a change after it is seen next time. */
	if (changed()) {
		generation++;
		put_locked(current);
		current = NULL;
	}
	if (current && !fresh) {
		s = current;
		s->refs++;
	}
	seen = generation;
	pthread_mutex_unlock(&lock);

	/* Read and used outside the lock: a caller reading a long table (a
	 * user can make it 16 MB) or judging by it holds no other caller. */
	if (!s) {
		if (!(s = calloc(1, sizeof(*s)))) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		if (read_table(&s->t, why, whylen) < 0) {
			free(s);
			return -1;
		}
		s->refs = 1;
		pthread_mutex_lock(&lock);
		/* Kept only if no change was seen since its poll: an older
		 * read could list a line of a mount id since reused. */
		if (generation == seen) {
			put_locked(current);
			current = s;
			s->refs++;
		}
		pthread_mutex_unlock(&lock);
	}
	rc = use(&s->t, arg);
	pthread_mutex_lock(&lock);
	put_locked(s);
	pthread_mutex_unlock(&lock);
	return rc;
}

unsigned long squash_mount_table_cache_reads(void)
{
	return atomic_load(&reads);
}

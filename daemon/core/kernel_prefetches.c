#include "config.h"
#include "core/kernel_prefetches.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount/kernel_prefetch.h"
#include "process/child_process.h"
#include "util/log.h"

/* How long a mount's teardown waits for the spawner's message naming its
 * prefetch, then for the killed prefetch to exit. */
#define STOP_PIDFD_MS 100
#define STOP_EXIT_MS 200

/* A place taken but not yet holding a process's socket. */
#define TAKEN (-2)
#define FREE (-1)

static struct place {
	int held;
	uid_t uid;
	char *mount_point; /* the mount it reads ahead and walks (NULL: none said) */
} places[KERNEL_PREFETCHES_MAX] = { [0 ... KERNEL_PREFETCHES_MAX - 1] = { FREE, 0, NULL } };
static pthread_mutex_t places_lock = PTHREAD_MUTEX_INITIALIZER;

/* Under places_lock: lets go of places whose process has ended. */
static void let_go_ended(void)
{
	for (int i = 0; i < KERNEL_PREFETCHES_MAX; i++)
		if (places[i].held >= 0 && kernel_prefetch_ended(places[i].held)) {
			close(places[i].held);
			places[i].held = FREE;
			free(places[i].mount_point);
			places[i].mount_point = NULL;
		}
}

static unsigned held_by(uid_t uid)
{
	unsigned n = 0;

	for (int i = 0; i < KERNEL_PREFETCHES_MAX; i++)
		n += places[i].held != FREE && places[i].uid == uid;
	return n;
}

int kernel_prefetches_take(uid_t uid)
{
	int place = -1;

	pthread_mutex_lock(&places_lock);
	let_go_ended();
	if (uid == 0 || held_by(uid) < KERNEL_PREFETCHES_PER_USER)
		for (int i = 0; i < KERNEL_PREFETCHES_MAX && place < 0; i++)
			if (places[i].held == FREE) {
				places[i] = (struct place){ TAKEN, uid, NULL };
				place = i;
			}
	pthread_mutex_unlock(&places_lock);
	return place;
}

static void hold_for(int place, int held, const char *mount_point)
{
	if (place < 0 || place >= KERNEL_PREFETCHES_MAX)
		return;
	pthread_mutex_lock(&places_lock);
	places[place].held = held >= 0 ? held : FREE;
	places[place].mount_point = held >= 0 && mount_point ? strdup(mount_point) : NULL;
	pthread_mutex_unlock(&places_lock);
}

void kernel_prefetches_hold(int place, int held)
{
	hold_for(place, held, NULL);
}

void kernel_prefetches_stop(const char *mount_point)
{
	int pidfds[KERNEL_PREFETCHES_MAX], n = 0;

	pthread_mutex_lock(&places_lock);
	let_go_ended();
	for (int i = 0; i < KERNEL_PREFETCHES_MAX; i++) {
		const struct place *p = &places[i];
		int pidfd;

		if (p->held >= 0 && p->mount_point && !strcmp(p->mount_point, mount_point) &&
		    (pidfd = kernel_prefetch_pidfd(p->held, STOP_PIDFD_MS)) >= 0)
			pidfds[n++] = pidfd;
	}
	pthread_mutex_unlock(&places_lock);
	for (int i = 0; i < n; i++) {
		struct pollfd exited = { .fd = pidfds[i], .events = POLLIN };

		child_kill(pidfds[i]);
		if (poll(&exited, 1, STOP_EXIT_MS) != 1)
			log_warning("the start profile read-ahead of %s did not end at once when killed "
				    "(its image's file system slow?); unmounting anyway", mount_point);
		else
			log_debug("stopped the start profile read-ahead of %s: its mount goes", mount_point);
		close(pidfds[i]);
	}
}

unsigned kernel_prefetches_of(uid_t uid)
{
	pthread_mutex_lock(&places_lock);
	let_go_ended();
	unsigned n = held_by(uid);
	pthread_mutex_unlock(&places_lock);
	return n;
}

void kernel_prefetches_start(const char *reader_path, int image_fd, const char *mount_point, uid_t uid)
{
	int place = kernel_prefetches_take(uid);

	if (place < 0) {
		log_debug("no start profile read ahead: %u of uid %u's prefetches still run (at most %d "
			  "for one user, %d on the node)", kernel_prefetches_of(uid), (unsigned)uid,
			  KERNEL_PREFETCHES_PER_USER, KERNEL_PREFETCHES_MAX);
		return;
	}
	hold_for(place, kernel_prefetch_start(reader_path, image_fd, mount_point), mount_point);
}

void kernel_prefetches_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
				   user_budget_emit emit, void *arg)
{
	struct place copy[KERNEL_PREFETCHES_MAX];

	(void)ds;
	(void)cfg;
	pthread_mutex_lock(&places_lock);
	let_go_ended();
	for (int i = 0; i < KERNEL_PREFETCHES_MAX; i++)
		copy[i] = places[i];
	pthread_mutex_unlock(&places_lock);
	/* One row per user, at the first of their places. */
	for (int i = 0; i < KERNEL_PREFETCHES_MAX; i++) {
		bool seen = copy[i].held == FREE;
		unsigned n = 0;

		for (int j = 0; j < i && !seen; j++)
			seen = copy[j].held != FREE && copy[j].uid == copy[i].uid;
		for (int j = i; j < KERNEL_PREFETCHES_MAX && !seen; j++)
			n += copy[j].held != FREE && copy[j].uid == copy[i].uid;
		if (!seen)
			emit(arg, copy[i].uid, "kernel prefetches", n,
			     copy[i].uid == 0 ? KERNEL_PREFETCHES_MAX : KERNEL_PREFETCHES_PER_USER);
	}
}

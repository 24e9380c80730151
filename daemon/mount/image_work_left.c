#include "config.h"

#include "mount/image_work_left.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/close_detached.h"

/* Openers let go of and not yet seen to exit: at most the budget per user
 * plus the user's requests running at once (the check comes before each
 * open), so a list is enough. */
struct opener_left {
	struct opener_left *next;
	uid_t uid;
	int pidfd;
};

static pthread_mutex_t openers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct opener_left *openers;

/* Drops the openers that exited (a pidfd polls readable then). */
static void prune_locked(void)
{
	for (struct opener_left **p = &openers; *p;) {
		struct pollfd q = { .fd = (*p)->pidfd, .events = POLLIN };

		if (poll(&q, 1, 0) == 0) {
			p = &(*p)->next;
			continue;
		}
		struct opener_left *gone = *p;
		*p = gone->next;
		close(gone->pidfd);
		free(gone);
	}
}

void image_work_left_opener(uid_t uid, int pidfd)
{
	struct opener_left *o;

	if (pidfd < 0)
		return;
	pthread_mutex_lock(&openers_lock);
	prune_locked();
	if ((o = malloc(sizeof(*o)))) {
		*o = (struct opener_left){ .next = openers, .uid = uid, .pidfd = pidfd };
		openers = o;
	} else {
		close(pidfd); /* uncounted: no worse than before */
	}
	pthread_mutex_unlock(&openers_lock);
}

static unsigned openers_left(uid_t uid)
{
	unsigned n = 0;

	pthread_mutex_lock(&openers_lock);
	prune_locked();
	for (struct opener_left *o = openers; o; o = o->next)
		n += o->uid == uid;
	pthread_mutex_unlock(&openers_lock);
	return n;
}

unsigned image_work_left(uid_t uid)
{
	return openers_left(uid) + close_detached_running(uid);
}

bool image_work_left_refuses(uid_t uid, char *why, size_t whylen)
{
	unsigned left;

	if (uid == 0 || (left = image_work_left(uid)) < IMAGE_WORK_LEFT_PER_USER)
		return false;
	snprintf(why, whylen,
		 "squashd still waits on %u earlier opens or closes of your images whose file system "
		 "did not answer (hung or stopped), the most one user may leave; your images are refused "
		 "until those end (see where your images lie: `squashctl status` shows this budget)",
		 left);
	return true;
}

size_t image_work_left_each(struct image_work_use *out, size_t max)
{
	struct close_detached_use *closes = malloc(max * sizeof(*closes));
	size_t n = 0, nc = closes ? close_detached_running_each(closes, max) : 0;

	pthread_mutex_lock(&openers_lock);
	prune_locked();
	for (struct opener_left *o = openers; o; o = o->next) {
		size_t k = 0;

		while (k < n && out[k].uid != o->uid)
			k++;
		if (k < n)
			out[k].left++;
		else if (n < max)
			out[n++] = (struct image_work_use){ .uid = o->uid, .left = 1 };
	}
	pthread_mutex_unlock(&openers_lock);
	for (size_t i = 0; i < nc; i++) {
		size_t k = 0;

		while (k < n && out[k].uid != closes[i].owner)
			k++;
		if (k < n)
			out[k].left += closes[i].running;
		else if (n < max)
			out[n++] = (struct image_work_use){ .uid = closes[i].owner, .left = closes[i].running };
	}
	free(closes);
	return n;
}

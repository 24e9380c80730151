#include "config.h"

#include "process/user_executor.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "util/log.h"
#include "util/peer.h"

/* Lines of peers gone before squashd looked share a budget of their
 * own, never the node's teardowns. */
_Static_assert(PEER_USER_GONE != USER_EXECUTOR_NOBODY, "gone peers are not nobody's work");

struct work {
	user_work_fn fn;
	void *arg;
	struct work *next;
};

/* One per user whose work ever ran: kept for the accounting (one per
 * local user at most, and users are few). */
struct user_queue {
	uid_t uid;
	struct work *head, *tail;
	bool served; /* a thread serves this queue now */
	unsigned queued;
	unsigned long long busy_ms, done;
	struct user_queue *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER; /* a thread ended */
static struct user_queue *users;
static unsigned threads;

/* Under lock. */
static struct user_queue *find_or_add(uid_t uid)
{
	struct user_queue *q;

	for (q = users; q; q = q->next)
		if (q->uid == uid)
			return q;
	q = calloc(1, sizeof(*q));
	if (q) {
		q->uid = uid;
		q->next = users;
		users = q;
	}
	return q;
}

/* A queue with work that no thread serves (under lock), or NULL. */
static struct user_queue *unserved(void)
{
	for (struct user_queue *q = users; q; q = q->next)
		if (q->head && !q->served)
			return q;
	return NULL;
}

static void *serve(void *arg)
{
	struct user_queue *q = arg;

	pthread_mutex_lock(&lock);
	while (q) {
		struct work *w;

		while ((w = q->head)) {
			q->head = w->next;
			if (!q->head)
				q->tail = NULL;
			pthread_mutex_unlock(&lock);
			long long start = squash_now_ms();
			/* Work after this user's processes ended: what it logs is
			 * on the user's budget (util/log.h); nobody's work is the
			 * node's own, on no budget. */
			if (q->uid != USER_EXECUTOR_NOBODY)
				log_context_peer(q->uid);
			w->fn(w->arg);
			log_context_clear();
			long long took = squash_now_ms() - start;
			free(w);
			pthread_mutex_lock(&lock);
			q->busy_ms += took > 0 ? (unsigned long long)took : 0;
			q->done++;
			q->queued--;
		}
		q->served = false;
		/* Idle: take over a user left waiting at the thread limit. */
		q = unserved();
		if (q)
			q->served = true;
	}
	threads--;
	pthread_cond_broadcast(&idle);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Under lock: a thread for q, unless at the limit (q then waits for the
 * first thread to go idle). */
static void start_locked(struct user_queue *q)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (q->served || threads >= USER_EXECUTOR_THREADS)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&t, &attr, serve, q);
	pthread_attr_destroy(&attr);
	if (rc == 0) {
		q->served = true;
		threads++;
	} else {
		log_warning("cannot start a thread for uid %u's work: %s", (unsigned)q->uid,
			    strerror(rc));
	}
}

int user_executor_run(uid_t uid, user_work_fn fn, void *arg)
{
	struct work *w = malloc(sizeof(*w));
	struct user_queue *q;

	if (!w)
		return -1;
	*w = (struct work){ fn, arg, NULL };
	pthread_mutex_lock(&lock);
	q = find_or_add(uid);
	if (q) {
		if (q->tail)
			q->tail->next = w;
		else
			q->head = w;
		q->tail = w;
		q->queued++;
		start_locked(q);
		/* No thread at all to take it: the caller runs it. (Then it
		 * is the queue's only work: earlier ones went the same way.) */
		if (!q->served && threads == 0) {
			q->head = q->tail = NULL;
			q->queued--;
			q = NULL;
		}
	}
	pthread_mutex_unlock(&lock);
	if (!q)
		free(w);
	return q ? 0 : -1;
}

size_t user_executor_usage(struct user_executor_use *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&lock);
	for (const struct user_queue *q = users; q && n < max; q = q->next)
		out[n++] = (struct user_executor_use){ q->uid, q->busy_ms, q->done, q->queued, q->served };
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned user_executor_drain(long long deadline_ms)
{
	unsigned queued = 0;

	pthread_mutex_lock(&lock);
	while (threads > 0 && squash_now_ms() < deadline_ms) {
		/* Polled in short steps: the condition variable's clock is
		 * the wall clock, which may jump. */
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&idle, &lock, &ts);
	}
	for (const struct user_queue *q = users; q; q = q->next)
		queued += q->queued;
	pthread_mutex_unlock(&lock);
	return queued;
}

unsigned user_executor_threads(void)
{
	pthread_mutex_lock(&lock);
	unsigned n = threads;
	pthread_mutex_unlock(&lock);
	return n;
}

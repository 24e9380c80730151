#include "config.h"
#include "server/user_queues.h"

#include <pthread.h>
#include <stdlib.h>

#include "array_grow.h"

/* Guards everything below: workers end their requests from their own
 * threads; everything else runs in the main loop. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct user {
	uid_t uid;
	unsigned running, queued;
	struct parked *head, *tail;
} *users;
static size_t n_users, cap_users;
static size_t turn;          /* the user whose turn it is next (round robin) */
static unsigned running_all; /* every user's, root's own included */
static unsigned running_users;

/* uid's entry (lock held), added when absent and add; n_users if none. */
static size_t entry(uid_t uid, bool add)
{
	size_t i;

	for (i = 0; i < n_users && users[i].uid != uid; i++)
		;
	if (i < n_users || !add)
		return i;
	if (array_reserve(&users, &cap_users, n_users + 1, sizeof(*users), 16) < 0)
		return n_users;
	users[n_users] = (struct user){ .uid = uid };
	return n_users++;
}

static void drop_if_idle(size_t i)
{
	if (users[i].running == 0 && users[i].queued == 0)
		users[i] = users[--n_users];
}

bool user_queue_push(struct parked *p, unsigned max_running, unsigned max_queued, unsigned *running,
		     unsigned *queued)
{
	pthread_mutex_lock(&lock);
	size_t i = entry(p->uid, true);
	bool ok = i < n_users;
	if (ok) {
		struct user *u = &users[i];
		/* Waiting for a slot of its own is bounded by max_queued;
		 * waiting for the pool only (slots free) is not. */
		unsigned limit = max_running == 0 ? MAX_WORKERS : max_running;
		unsigned free_slots = u->running < limit ? limit - u->running : 0;
		*running = u->running;
		*queued = u->queued;
		ok = p->uid == 0 || u->queued < max_queued + free_slots;
		if (ok) {
			struct parked **at = &u->head;
			if (p->first)
				while (*at && (*at)->first)
					at = &(*at)->next;
			else if (u->tail)
				at = &u->tail->next;
			p->next = *at;
			*at = p;
			if (!p->next)
				u->tail = p;
			u->queued++;
		} else {
			drop_if_idle(i);
		}
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

static struct parked *pop(size_t i)
{
	struct user *u = &users[i];
	struct parked *p = u->head;

	u->head = p->next;
	if (!u->head)
		u->tail = NULL;
	u->queued--;
	return p;
}

static struct parked *start(size_t i)
{
	struct parked *p = pop(i);

	users[i].running++;
	running_all++;
	running_users += users[i].uid != 0;
	return p;
}

struct parked *user_queue_next(unsigned max_running)
{
	struct parked *p = NULL;

	pthread_mutex_lock(&lock);
	size_t root = entry(0, false);
	if (running_all >= MAX_WORKERS) {
		/* full */
	} else if (root < n_users && users[root].queued) {
		p = start(root);
	} else if (running_users < MAX_WORKERS - ROOT_WORKERS) {
		for (size_t k = 0; k < n_users && !p; k++) {
			size_t i = (turn + k) % n_users;
			if (users[i].uid == 0 || !users[i].queued ||
			    (max_running && users[i].running >= max_running))
				continue;
			p = start(i);
			turn = i + 1;
		}
	}
	pthread_mutex_unlock(&lock);
	return p;
}

void user_queue_done(uid_t uid)
{
	pthread_mutex_lock(&lock);
	size_t i = entry(uid, false);
	if (i < n_users && users[i].running) {
		users[i].running--;
		running_all--;
		running_users -= uid != 0;
		drop_if_idle(i);
	}
	pthread_mutex_unlock(&lock);
}

struct parked *user_queue_expired(long long now_ms, unsigned *running)
{
	struct parked *found = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_users && !found; i++) {
		struct parked **pp = &users[i].head, *prev = NULL;
		for (; *pp; prev = *pp, pp = &(*pp)->next) {
			if (now_ms >= 0 && (*pp)->deadline_ms > now_ms)
				continue;
			found = *pp;
			*pp = found->next;
			if (users[i].tail == found)
				users[i].tail = prev;
			users[i].queued--;
			*running = users[i].running;
			drop_if_idle(i);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return found;
}

long long user_queue_next_deadline(void)
{
	long long next = -1;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_users; i++)
		for (const struct parked *p = users[i].head; p; p = p->next)
			if (next < 0 || p->deadline_ms < next)
				next = p->deadline_ms;
	pthread_mutex_unlock(&lock);
	return next;
}

unsigned user_queue_running(void)
{
	pthread_mutex_lock(&lock);
	unsigned n = running_all;
	pthread_mutex_unlock(&lock);
	return n;
}

void user_queue_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
			    user_budget_emit emit, void *arg)
{
	(void)ds;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_users; i++) {
		if (users[i].uid == 0)
			continue;
		emit(arg, users[i].uid, "requests running", users[i].running, cfg->max_requests_per_user);
		emit(arg, users[i].uid, "requests queued", users[i].queued, cfg->max_queued_per_user);
	}
	pthread_mutex_unlock(&lock);
}

#include "config.h"
#include "server/user_slots.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "clock.h"

/* Users with requests in progress; at most one entry per worker. */
#define MAX_USERS 512

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct {
	uid_t uid;
	unsigned running, waiting;
} users[MAX_USERS];
static size_t n_users;

static void init(void)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&freed, &attr);
	pthread_condattr_destroy(&attr);
}

/* uid's entry (lock held); added when absent. */
static size_t entry(uid_t uid)
{
	size_t i;

	for (i = 0; i < n_users && users[i].uid != uid; i++)
		;
	if (i == n_users) {
		users[i].uid = uid;
		users[i].running = users[i].waiting = 0;
		n_users++;
	}
	return i;
}

static void drop_if_idle(size_t i)
{
	if (users[i].running == 0 && users[i].waiting == 0)
		users[i] = users[--n_users];
}

bool user_slot_take(uid_t uid, unsigned max, long long deadline_ms, unsigned *busy)
{
	pthread_once(&once, init);
	pthread_mutex_lock(&lock);
	size_t i = entry(uid);
	if (uid != 0 && max > 0 && users[i].running >= max) {
		users[i].waiting++;
		while (users[i].running >= max) {
			long long left = deadline_ms - squash_now_ms();
			if (left <= 0)
				break;
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += left / 1000;
			ts.tv_nsec += (left % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&freed, &lock, &ts);
			i = entry(uid); /* the table moves when others leave it */
		}
		users[i].waiting--;
		if (users[i].running >= max) {
			*busy = users[i].running;
			drop_if_idle(i);
			pthread_mutex_unlock(&lock);
			return false;
		}
	}
	users[i].running++;
	pthread_mutex_unlock(&lock);
	return true;
}

void user_slot_put(uid_t uid)
{
	pthread_mutex_lock(&lock);
	size_t i = entry(uid);
	if (users[i].running)
		users[i].running--;
	bool wake = users[i].waiting > 0;
	drop_if_idle(i);
	pthread_mutex_unlock(&lock);
	if (wake)
		pthread_cond_broadcast(&freed);
}

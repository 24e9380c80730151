#include "config.h"
#include "server/connections.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "frame.h"
#include "util/log.h"

/* Open connections per peer uid; guarded by count_lock (workers close). */
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uid_t uid;
	unsigned count;
} *per_user;
static size_t n_users, cap_users;
static unsigned open_total;

/* Being read: the main loop's alone. */
static struct reading {
	int fd;
	struct peer peer;
	long long deadline_ms;
	bool starved;
} *reading;
static size_t n_reading, cap_reading;
static uint8_t *frame_buf; /* one frame at a time, SQUASH_FRAME_MAX */

bool connection_admit(const struct peer *peer)
{
	size_t i;
	bool ok = true;

	pthread_mutex_lock(&count_lock);
	for (i = 0; i < n_users && per_user[i].uid != peer->uid; i++)
		;
	if (peer->uid != 0 && i < n_users && per_user[i].count >= MAX_CONNECTIONS_PER_USER)
		ok = false;
	if (ok && i == n_users) {
		if (n_users == cap_users) {
			size_t cap = cap_users ? 2 * cap_users : 16;
			void *more = realloc(per_user, cap * sizeof(*per_user));
			if (more) {
				per_user = more;
				cap_users = cap;
			}
		}
		if (n_users < cap_users)
			per_user[n_users++] = (typeof(per_user[0])){ peer->uid, 0 };
		else
			ok = false;
	}
	if (ok) {
		per_user[i].count++;
		open_total++;
	}
	pthread_mutex_unlock(&count_lock);
	return ok;
}

void connection_close(int fd, const struct peer *peer)
{
	close(fd);
	pthread_mutex_lock(&count_lock);
	open_total--;
	for (size_t i = 0; i < n_users; i++) {
		if (per_user[i].uid == peer->uid) {
			if (--per_user[i].count == 0)
				per_user[i] = per_user[--n_users];
			break;
		}
	}
	pthread_mutex_unlock(&count_lock);
}

bool connections_full(void)
{
	pthread_mutex_lock(&count_lock);
	bool full = open_total >= MAX_CONNECTIONS;
	pthread_mutex_unlock(&count_lock);
	return full;
}

bool connection_read_start(int fd, const struct peer *peer, bool starved)
{
	if (!frame_buf && !(frame_buf = malloc(SQUASH_FRAME_MAX)))
		return false;
	if (n_reading == cap_reading) {
		size_t cap = cap_reading ? 2 * cap_reading : 64;
		struct reading *more = realloc(reading, cap * sizeof(*reading));
		if (!more)
			return false;
		reading = more;
		cap_reading = cap;
	}
	reading[n_reading++] = (struct reading){ fd, *peer, squash_now_ms() + CONNECTION_IDLE_MS, starved };
	return true;
}

size_t connections_reading(void)
{
	return n_reading;
}

void connections_poll_fill(struct pollfd *pfd)
{
	for (size_t i = 0; i < n_reading; i++)
		pfd[i] = (struct pollfd){ .fd = reading[i].fd, .events = POLLIN };
}

void connections_read(const struct pollfd *pfd, size_t n, long long now_ms,
		      void (*got)(void *arg, int fd, const struct peer *peer, const uint8_t *frame,
				  size_t len, int rc),
		      void *arg)
{
	/* Backwards: a finished connection takes the last one's place, which
	 * was already looked at (or is not in pfd: added after the poll). */
	for (size_t i = n < n_reading ? n : n_reading; i-- > 0;) {
		struct reading r = reading[i];
		size_t len = 0;
		int rc = SQUASH_FRAME_ETIMEDOUT;

		if (pfd[i].revents)
			rc = squash_frame_recv(r.fd, frame_buf, &len, 0);
		if (rc == SQUASH_FRAME_ETIMEDOUT && now_ms < r.deadline_ms)
			continue; /* nothing yet */
		reading[i] = reading[--n_reading];
		if (rc == SQUASH_FRAME_OK || rc == SQUASH_FRAME_ETOOBIG) {
			got(arg, r.fd, &r.peer, frame_buf, len, r.starved ? CONNECTION_STARVED : rc);
			continue;
		}
		if (rc == SQUASH_FRAME_ETIMEDOUT)
			log_debug("closing idle connection from uid %u pid %d", (unsigned)r.peer.uid,
				  (int)r.peer.pid);
		connection_close(r.fd, &r.peer);
	}
}

long long connections_next_deadline(void)
{
	long long next = -1;

	for (size_t i = 0; i < n_reading; i++)
		if (next < 0 || reading[i].deadline_ms < next)
			next = reading[i].deadline_ms;
	return next;
}

void connections_close_reading(void)
{
	while (n_reading) {
		n_reading--;
		connection_close(reading[n_reading].fd, &reading[n_reading].peer);
	}
}

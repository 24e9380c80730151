#include "config.h"
#include "server/connections.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array_grow.h"
#include "clock.h"
#include "frame.h"
#include "util/log.h"

/* Every connection taken and not yet closed; workers close too. */
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned open_total;

/* Being read: the main loop's alone, like the per-uid counts of them. */
static struct reading {
	int fd;
	struct peer peer;
	long long deadline_ms;
	bool starved;
} *reading;
static size_t n_reading, cap_reading;
static struct {
	uid_t uid;
	unsigned count;
} *sending; /* per non-root peer's user (peer.h): its connections in reading */
static size_t n_sending, cap_sending;
static unsigned sending_users; /* the counts above, summed */
static uint8_t *frame_buf; /* one frame at a time, SQUASH_FRAME_MAX */


/* The slot of uid among sending, added when add; -1 when not there (or
 * out of memory). */
static ssize_t sending_slot(uid_t uid, bool add)
{
	for (size_t i = 0; i < n_sending; i++)
		if (sending[i].uid == uid)
			return (ssize_t)i;
	if (!add)
		return -1;
	if (array_reserve(&sending, &cap_sending, n_sending + 1, sizeof(*sending), 16) < 0)
		return -1;
	sending[n_sending] = (typeof(sending[0])){ uid, 0 };
	return (ssize_t)n_sending++;
}

/* A connection of peer left reading (its request arrived, or it closed). */
static void sending_done(const struct peer *peer)
{
	ssize_t i = peer->uid != 0 ? sending_slot(peer->user, false) : -1;

	if (i < 0)
		return;
	sending_users--;
	if (--sending[i].count == 0)
		sending[i] = sending[--n_sending];
}

/* A connection closed for the budgets of all users together: one line
 * per 10 s at most, with the count since (the uids may be many). */
static void log_users_full(const struct peer *peer, const char *what)
{
	static long long next_ms;
	static unsigned untold;
	long long now = squash_now_ms();

	if (now < next_ms) {
		untold++;
		return;
	}
	log_warning("closing a connection from uid %u pid %d: %s (and %u more since the last such line)",
		    (unsigned)peer->uid, (int)peer->pid, what, untold);
	untold = 0;
	next_ms = now + 10000;
}

void connection_close(int fd)
{
	close(fd);
	pthread_mutex_lock(&count_lock);
	open_total--;
	pthread_mutex_unlock(&count_lock);
}

bool connections_full(void)
{
	pthread_mutex_lock(&count_lock);
	bool full = open_total >= MAX_CONNECTIONS;
	pthread_mutex_unlock(&count_lock);
	return full;
}

/* Room for one more connection being read, and the frame buffer. */
static bool reading_room(void)
{
	if (!frame_buf && !(frame_buf = malloc(SQUASH_FRAME_MAX)))
		return false;
	return array_reserve(&reading, &cap_reading, n_reading + 1, sizeof(*reading), 64) == 0;
}

bool connection_take(int fd, const struct peer *peer, bool starved, connection_got_fn got, void *arg)
{
	size_t len = 0;
	int rc;

	pthread_mutex_lock(&count_lock);
	unsigned total = ++open_total;
	pthread_mutex_unlock(&count_lock);
	if (peer->uid != 0 && total > MAX_CONNECTIONS - ROOT_CONNECTIONS) {
		log_users_full(peer, "users hold all connections but root's share (MAX_CONNECTIONS)");
		connection_close(fd);
		return false;
	}
	if (!reading_room()) {
		log_error("out of memory reading a request from uid %u pid %d", (unsigned)peer->uid,
			  (int)peer->pid);
		connection_close(fd);
		return false;
	}
	/* Read now what is there: only a peer that has not sent yet holds a
	 * place among its user's MAX_SENDING_PER_USER, so a burst of one
	 * user's requests reaches the queue, which answers with a reason. */
	rc = squash_frame_recv(fd, frame_buf, &len, 0);
	if (rc == SQUASH_FRAME_OK || rc == SQUASH_FRAME_ETOOBIG) {
		got(arg, fd, peer, frame_buf, len, starved ? CONNECTION_STARVED : rc);
		return true;
	}
	if (rc != SQUASH_FRAME_ETIMEDOUT) { /* closed already */
		connection_close(fd);
		return false;
	}
	if (peer->uid != 0 && sending_users >= MAX_SENDING_USERS) {
		log_users_full(peer, "users hold MAX_SENDING_USERS connections that sent nothing yet");
		connection_close(fd);
		return false;
	}
	if (peer->uid != 0) {
		ssize_t slot = sending_slot(peer->user, true);
		if (slot < 0 || sending[slot].count >= MAX_SENDING_PER_USER) {
			if (slot >= 0 && peer->user == PEER_USER_GONE)
				log_peer_warning(peer->user, "processes gone before squashd looked have %u "
						 "connections open that sent no request yet; closing one "
						 "more from uid %u pid %d", sending[slot].count,
						 (unsigned)peer->uid, (int)peer->pid);
			else if (slot >= 0)
				log_peer_warning(peer->user, "uid %u has %u connections open that sent no "
						 "request yet (its user namespaces' uids included); "
						 "closing one more from uid %u pid %d",
						 (unsigned)peer->user, sending[slot].count,
						 (unsigned)peer->uid, (int)peer->pid);
			else
				log_error("out of memory counting connections of uid %u", (unsigned)peer->uid);
			connection_close(fd);
			return false;
		}
		sending[slot].count++;
		sending_users++;
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

void connections_read(const struct pollfd *pfd, size_t n, long long now_ms, connection_got_fn got,
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
		sending_done(&r.peer);
		if (rc == SQUASH_FRAME_OK || rc == SQUASH_FRAME_ETOOBIG) {
			got(arg, r.fd, &r.peer, frame_buf, len, r.starved ? CONNECTION_STARVED : rc);
			continue;
		}
		if (rc == SQUASH_FRAME_ETIMEDOUT)
			log_debug("closing idle connection from uid %u pid %d", (unsigned)r.peer.uid,
				  (int)r.peer.pid);
		connection_close(r.fd);
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
		sending_done(&reading[n_reading].peer);
		connection_close(reading[n_reading].fd);
	}
}

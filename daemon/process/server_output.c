#include "config.h"

#include "process/server_output.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "clock.h"
#include "util/log.h"
#include "util/log_budget.h"

#define LINE_MAX_BYTES 512
#define BURST 20	  /* lines a server may log at once */
#define REFILL_MS 1000	  /* then one line a second */
/* Bytes read per server: a server writing without end (a user can write
 * /dev/zero into their reader's stderr) would otherwise cost squashd a CPU
 * in read() alone. Past the budget the stream is not read until it
 * refills; the pipe fills up and the writer blocks, which slows only it. */
#define BYTES_BURST (64 * 1024)
#define BYTES_PER_S (16 * 1024)

struct stream {
	int fd;
	int pidfd;              /* the server's (-1: none): its exit ends the stream */
	pid_t pid;
	uid_t uid;
	char name[32];
	char buf[LINE_MAX_BYTES];
	size_t len;
	unsigned tokens;
	long long refilled_ms;
	unsigned long suppressed;
	size_t bytes;		/* budget left (BYTES_BURST at most) */
	long long bytes_ms;	/* when it was last refilled */
	long long paused_until; /* not read before (monotonic ms); 0: read */
	struct stream *next;
};

/* epoll's data for a stream's pidfd: the stream's address with this bit
 * (a struct's address never has it). */
#define EXITED 1u

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int epfd = -1;
/* Every stream, also for the servers that outlive squashd (a restart
 * keeps them): listed, not only known to epoll. */
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream *streams;
/* The lines of each user's servers together (under streams_lock). */
static struct log_budget users_budget;

/* The pipe is closed before the stream leaves the list: once status no
 * longer shows a stream, its server's writes fail (EPIPE). */
static void stream_free(struct stream *s)
{
	pthread_mutex_lock(&streams_lock);
	epoll_ctl(epfd, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	if (s->pidfd >= 0) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, s->pidfd, NULL);
		close(s->pidfd);
	}
	for (struct stream **ps = &streams; *ps; ps = &(*ps)->next)
		if (*ps == s) {
			*ps = s->next;
			break;
		}
	pthread_mutex_unlock(&streams_lock);
	free(s);
}

/* The lines s may log at now (streams_lock held). */
static unsigned lines_at(const struct stream *s, long long now)
{
	unsigned long more = (unsigned long)((now - s->refilled_ms) / REFILL_MS);

	return more >= BURST - s->tokens ? BURST : s->tokens + (unsigned)more;
}

/* The bytes s may have read at now (streams_lock held). */
static size_t bytes_at(const struct stream *s, long long now)
{
	unsigned long long more = (unsigned long long)(now - s->bytes_ms) * BYTES_PER_S / 1000;

	return more >= BYTES_BURST - s->bytes ? BYTES_BURST : s->bytes + (size_t)more;
}

/* Budgets refilled to now (streams_lock held: squashctl status reads them). */
static void refill_lines(struct stream *s, long long now)
{
	if (now - s->refilled_ms >= REFILL_MS) {
		s->tokens = lines_at(s, now);
		s->refilled_ms = now;
	}
}

static void refill_bytes(struct stream *s, long long now)
{
	if ((unsigned long long)(now - s->bytes_ms) * BYTES_PER_S / 1000) {
		s->bytes = bytes_at(s, now);
		s->bytes_ms = now;
	}
}

static void emit(struct stream *s, const char *line, size_t len)
{
	long long now = squash_now_ms();
	char text[LINE_MAX_BYTES + 1];

	unsigned long users_left_out = 0;
	bool users_spent = false;

	pthread_mutex_lock(&streams_lock);
	refill_lines(s, now);
	bool spent = s->tokens == 0;
	if (!spent)
		s->tokens--;
	else
		s->suppressed++;
	/* Then the budget all of the user's servers share, so that a user who
	 * starts server after server (squashfuse_ll mounts, readers retired)
	 * gets no more lines than with one. Its own budget, not the user's
	 * budget of squashd's lines (log_context_peer): what a reader writes
	 * never crowds out squashd's lines about it. */
	if (!spent)
		users_spent = !log_budget_take(&users_budget, (uint32_t)s->uid, now, &users_left_out);
	pthread_mutex_unlock(&streams_lock);
	if (spent || users_spent)
		return;
	if (users_left_out)
		log_warning("FUSE servers of uid %u: %lu lines not logged (at most %d at once, then one "
			    "per %d s, for all of a user's servers)", (unsigned)s->uid, users_left_out,
			    LOG_BUDGET_BURST, LOG_BUDGET_REFILL_MS / 1000);
	if (s->suppressed) {
		log_warning("%s pid %d (uid %u): %lu lines not logged (more than %d at once, then one a second)",
			    s->name, (int)s->pid, (unsigned)s->uid, s->suppressed, BURST);
		s->suppressed = 0;
	}
	/* The user's bytes: no control characters reach the log. */
	for (size_t i = 0; i < len; i++)
		text[i] = (unsigned char)line[i] < 0x20 || line[i] == 0x7f ? '?' : line[i];
	text[len] = '\0';
	log_info("%s pid %d (uid %u): %s", s->name, (int)s->pid, (unsigned)s->uid, text);
}

/* Refills the byte budget; false when it is spent (the stream is then
 * paused until one read's worth is back). */
static bool bytes_left(struct stream *s)
{
	long long now = squash_now_ms();

	pthread_mutex_lock(&streams_lock);
	refill_bytes(s, now);
	size_t left = s->bytes;
	pthread_mutex_unlock(&streams_lock);
	if (left >= LINE_MAX_BYTES)
		return true;
	s->paused_until = now + (long long)(LINE_MAX_BYTES - left) * 1000 / BYTES_PER_S + 1;
	/* Out of epoll, not only without EPOLLIN: a hang-up would still be
	 * reported, over and over. */
	epoll_ctl(epfd, EPOLL_CTL_DEL, s->fd, NULL);
	return false;
}

/* Reads what is there, within the byte budget; false at EOF or error. */
static bool drain(struct stream *s)
{
	for (;;) {
		if (!bytes_left(s))
			return true;
		ssize_t n = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
		if (n > 0) {
			pthread_mutex_lock(&streams_lock);
			s->bytes -= (size_t)n < s->bytes ? (size_t)n : s->bytes;
			pthread_mutex_unlock(&streams_lock);
		}

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0) {
			if (s->len)
				emit(s, s->buf, s->len);
			if (s->suppressed)
				log_warning("%s pid %d (uid %u): %lu lines not logged", s->name, (int)s->pid,
					    (unsigned)s->uid, s->suppressed);
			return false;
		}
		s->len += (size_t)n;
		char *start = s->buf, *nl;
		while ((nl = memchr(start, '\n', s->len - (size_t)(start - s->buf)))) {
			emit(s, start, (size_t)(nl - start));
			start = nl + 1;
		}
		s->len -= (size_t)(start - s->buf);
		memmove(s->buf, start, s->len);
		if (s->len == sizeof(s->buf)) { /* a line too long: its start only */
			emit(s, s->buf, s->len);
			s->len = 0;
		}
	}
}

/* Streams whose budget is back are read again; returns the ms until the
 * next paused one is due, -1 when none is paused. */
static int resume_due(void)
{
	long long now = squash_now_ms(), next = -1;

	pthread_mutex_lock(&streams_lock);
	for (struct stream *s = streams; s; s = s->next) {
		if (!s->paused_until)
			continue;
		if (s->paused_until <= now) {
			s->paused_until = 0;
			struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
			epoll_ctl(epfd, EPOLL_CTL_ADD, s->fd, &ev);
		} else if (next < 0 || s->paused_until - now < next) {
			next = s->paused_until - now;
		}
	}
	pthread_mutex_unlock(&streams_lock);
	return (int)next;
}

static void *output_loop(void *unused)
{
	(void)unused;
	for (;;) {
		struct epoll_event ev[16];
		int n = epoll_wait(epfd, ev, 16, resume_due());

		for (int i = 0; i < n; i++) {
			struct stream *s = (struct stream *)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)EXITED);

			/* The server ended: what it wrote is read (within its
			 * budget) and the stream goes, even if the pipe's write end
			 * lives on elsewhere (a user who ptraced their reader can
			 * pass it on; it would hold a stream, a descriptor and a
			 * budget of squashd's per reader started). */
			if (!s)
				continue; /* its stream went earlier in this batch */
			if ((ev[i].data.u64 & EXITED) || !drain(s)) {
				if (ev[i].data.u64 & EXITED)
					(void)drain(s);
				stream_free(s);
				for (int j = i + 1; j < n; j++)
					if ((ev[j].data.u64 & ~(uint64_t)EXITED) == (uint64_t)(uintptr_t)s)
						ev[j].data.u64 = 0;
			}
		}
	}
	return NULL;
}

static void start(void)
{
	pthread_t t;
	pthread_attr_t attr;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 128 * 1024);
	if (pthread_create(&t, &attr, output_loop, NULL) != 0) {
		close(epfd);
		epfd = -1;
	}
	pthread_attr_destroy(&attr);
}

void server_output_watch(int fd, int pidfd, pid_t pid, uid_t uid, const char *path)
{
	struct stream *s = calloc(1, sizeof(*s));
	const char *base = strrchr(path, '/');

	pthread_once(&once, start);
	if (!s || epfd < 0) {
		free(s);
		close(fd); /* the server's writes then fail (EPIPE): it logs nothing */
		return;
	}
	s->fd = fd;
	s->pidfd = pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 0) : -1;
	s->pid = pid;
	s->uid = uid;
	s->tokens = BURST;
	s->refilled_ms = squash_now_ms();
	s->bytes = BYTES_BURST;
	s->bytes_ms = s->refilled_ms;
	snprintf(s->name, sizeof(s->name), "%s", base ? base + 1 : path);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
	struct epoll_event exited = { .events = EPOLLIN, .data.u64 = (uint64_t)(uintptr_t)s | EXITED };
	/* Both added under streams_lock: once fd is in the set, the output
	 * thread may read a server that already ended and free s, but only
	 * through stream_free, which takes the lock; so s outlives the second
	 * add. A pidfd that cannot be watched stays unwatched (EOF alone ends
	 * the stream) and is closed with it. */
	pthread_mutex_lock(&streams_lock);
	s->next = streams;
	streams = s;
	bool added = fcntl(fd, F_SETFL, O_NONBLOCK) == 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
	if (added && s->pidfd >= 0)
		(void)epoll_ctl(epfd, EPOLL_CTL_ADD, s->pidfd, &exited);
	pthread_mutex_unlock(&streams_lock);
	if (!added)
		stream_free(s);
}

size_t server_output_usage(struct server_output_use *out, size_t max)
{
	long long now = squash_now_ms();
	size_t n = 0;

	pthread_mutex_lock(&streams_lock);
	for (struct stream *s = streams; s; s = s->next) {
		size_t i;

		for (i = 0; i < n && out[i].uid != s->uid; i++)
			;
		if (i == n) {
			if (n == max)
				continue;
			out[n++] = (struct server_output_use){ .uid = s->uid };
		}
		out[i].lines += BURST - lines_at(s, now);
		out[i].lines_burst += BURST;
		out[i].bytes += BYTES_BURST - bytes_at(s, now);
		out[i].bytes_burst += BYTES_BURST;
	}
	pthread_mutex_unlock(&streams_lock);
	return n;
}

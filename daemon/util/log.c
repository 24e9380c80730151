#include "config.h"

#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "util/journal_send.h"
#include "util/log_budget.h"
#include "util/peer.h"
#include "util/utf8.h"

static bool log_debug_enabled;
/* systemd sets JOURNAL_STREAM when stderr is the journal: then lines are
 * sent to the journal directly, with fields. */
static bool log_to_journal;
/* Lines the journal or stderr did not take at once (log_line). */
static unsigned long dropped_journal, dropped_stderr;

/* stderr as squashd writes its lines (log_init): a pipe through a
 * descriptor of its own that does not block (whoever else writes to the
 * pipe, a child's stdio or the harness that started squashd, keeps its
 * own), a socket with MSG_DONTWAIT, anything else (a file, a terminal)
 * as it is. Only in the process that set it up: a forked child may have
 * closed that descriptor, and its number may name another file there. */
enum stderr_kind { STDERR_PLAIN, STDERR_PIPE, STDERR_SOCKET };
static enum stderr_kind stderr_kind;
static int stderr_pipe = -1;
static pid_t stderr_owner;

struct log_context {
	bool has_job, has_uid;
	uint32_t job_id;
	unsigned long uid;
	char image[PATH_MAX];
	const char *mode; /* static string or NULL */
	uint32_t peer_uid; /* info and warnings draw on its budget; 0: none */
};

static __thread struct log_context ctx;

/* A pipe or socket may stop being read; a line written there must be
 * dropped then, not wait under a lock every request takes. */
static void stderr_setup(void)
{
	struct stat st;

	stderr_kind = STDERR_PLAIN;
	stderr_pipe = -1;
	stderr_owner = getpid();
	if (fstat(STDERR_FILENO, &st) < 0)
		return;
	if (S_ISFIFO(st.st_mode)) {
		stderr_pipe = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		stderr_kind = stderr_pipe >= 0 ? STDERR_PIPE : STDERR_PLAIN;
	} else if (S_ISSOCK(st.st_mode)) {
		stderr_kind = STDERR_SOCKET;
	}
}

void log_init(bool debug)
{
	const char *js = getenv("JOURNAL_STREAM");

	log_debug_enabled = debug;
	log_to_journal = js != NULL && js[0] != '\0';
	stderr_setup();
}

void log_after_fork(void)
{
	stderr_setup();
}

void log_set_debug(bool debug)
{
	__atomic_store_n(&log_debug_enabled, debug, __ATOMIC_RELAXED);
}

void log_context_job(uint32_t job_id, long uid)
{
	ctx.has_job = true;
	ctx.job_id = job_id;
	ctx.has_uid = uid >= 0;
	ctx.uid = uid >= 0 ? (unsigned long)uid : 0;
}

void log_context_image(const char *image, const char *mode)
{
	snprintf(ctx.image, sizeof(ctx.image), "%s", image ? image : "");
	ctx.mode = mode;
}

void log_context_peer(uint32_t peer_uid)
{
	ctx.peer_uid = peer_uid;
}

void log_context_clear(void)
{
	ctx.peer_uid = 0;
	ctx.has_job = ctx.has_uid = false;
	ctx.image[0] = '\0';
	ctx.mode = NULL;
}

size_t log_context_fields(char fields[LOG_FIELDS_MAX][LOG_FIELD_LEN])
{
	size_t n = 0;

	if (ctx.has_job)
		snprintf(fields[n++], LOG_FIELD_LEN, "JOB_ID=%u", ctx.job_id);
	if (ctx.has_uid)
		snprintf(fields[n++], LOG_FIELD_LEN, "USER_ID=%lu", ctx.uid);
	if (ctx.image[0])
		snprintf(fields[n++], LOG_FIELD_LEN, "IMAGE=%s", ctx.image);
	if (ctx.mode)
		snprintf(fields[n++], LOG_FIELD_LEN, "MODE=%s", ctx.mode);
	return n;
}

/* One journal entry with the context's fields. */
static enum journal_send journal_line(int priority, const char *level, const char *msg)
{
	char fields[LOG_FIELDS_MAX][LOG_FIELD_LEN];
	char message[2200], prio[16];
	struct iovec iov[LOG_FIELDS_MAX + 3];
	size_t n = log_context_fields(fields), k = 0;

	snprintf(message, sizeof(message), "MESSAGE=squashd: %s: %s", level, msg);
	snprintf(prio, sizeof(prio), "PRIORITY=%d", priority);
	iov[k++] = (struct iovec){ message, strlen(message) };
	iov[k++] = (struct iovec){ prio, strlen(prio) };
	iov[k++] = (struct iovec){ (char *)"SYSLOG_IDENTIFIER=squashd", strlen("SYSLOG_IDENTIFIER=squashd") };
	for (size_t i = 0; i < n; i++)
		iov[k++] = (struct iovec){ fields[i], strlen(fields[i]) };
	return journal_send(iov, k);
}

/* One write, so that a line is never split (a pipe takes up to PIPE_BUF
 * bytes at once, or nothing). False when stderr did not take it all (a
 * socket may take part of a line: the rest is lost, and counted so). */
static bool stderr_line(const char *prefix, const char *level, const char *msg)
{
	char line[2300];
	int len = snprintf(line, sizeof(line), "%ssquashd: %s: %s\n", log_to_journal ? prefix : "",
			   level, msg);
	enum stderr_kind kind = getpid() == stderr_owner ? stderr_kind : STDERR_PLAIN;
	ssize_t n;

	if (len >= (int)sizeof(line)) {
		len = (int)sizeof(line) - 1;
		line[len - 1] = '\n';
	}
	if (kind == STDERR_PIPE)
		n = write(stderr_pipe, line, (size_t)len);
	else if (kind == STDERR_SOCKET)
		n = send(STDERR_FILENO, line, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
	else
		n = write(STDERR_FILENO, line, (size_t)len);
	if (n == len)
		return true;
	/* Another failure (a closed stderr) would fail every line: not a
	 * busy log, nothing to count. */
	return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK;
}

/* Paths in messages are bytes from users: control bytes (a newline would
 * forge a log line) and bytes that are not UTF-8 are written as \xNN, so
 * every line is one line of text. */
static void make_printable(const char *in, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t used = 0;

	while (*p && used + 5 < cap) {
		uint32_t cp;
		size_t len = utf8_sequence(p, &cp);

		if (len == 0 || cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
			len = len ? len : 1;
			for (size_t i = 0; i < len && used + 5 < cap; i++)
				used += (size_t)snprintf(out + used, cap - used, "\\x%02x", p[i]);
		} else {
			memcpy(out + used, p, len);
			used += len;
		}
		p += len;
	}
	out[used] = '\0';
}

/* Writes one line: to the journal, or to stderr when there is none (a
 * busy journal is not written around: stderr is its stream then). Returns
 * the counter of the sink that did not take it, or NULL when taken. */
static unsigned long *emit(int priority, const char *prefix, const char *level, const char *msg)
{
	enum journal_send sent = log_to_journal ? journal_line(priority, level, msg) : JOURNAL_UNAVAILABLE;

	if (sent == JOURNAL_SENT)
		return NULL;
	if (sent == JOURNAL_BUSY)
		return &dropped_journal;
	return stderr_line(prefix, level, msg) ? NULL : &dropped_stderr;
}

/* After a line was taken: how many were not, before it. The count is
 * nobody's request's: the thread's context is left out of its entry. A
 * count that is not taken either goes back, to be said later. */
static void say_dropped(void)
{
	static const struct { unsigned long *count; const char *sink; } sinks[] = {
		{ &dropped_journal, "the journal" }, { &dropped_stderr, "the log (squashd's stderr)" },
	};
	struct log_context saved;
	bool cleared = false;

	for (size_t i = 0; i < sizeof(sinks) / sizeof(sinks[0]); i++) {
		unsigned long n = __atomic_exchange_n(sinks[i].count, 0, __ATOMIC_RELAXED);
		char msg[160];

		if (!n)
			continue;
		if (!cleared) {
			saved = ctx;
			log_context_clear();
			cleared = true;
		}
		snprintf(msg, sizeof(msg), "%lu log lines were dropped: %s did not take them at once", n,
			 sinks[i].sink);
		if (emit(LOG_WARNING, SD_WARNING, "warning", msg)) {
			__atomic_add_fetch(sinks[i].count, n, __ATOMIC_RELAXED);
			break;
		}
	}
	if (cleared)
		ctx = saved;
}

static void log_line(int priority, const char *prefix, const char *level, const char *fmt,
		     va_list ap)
{
	char raw[2048], msg[2048];
	int saved = errno; /* callers may log between a failure and %m/errno */
	unsigned long *dropped;

	vsnprintf(raw, sizeof(raw), fmt, ap);
	make_printable(raw, msg, sizeof(msg));
	if ((dropped = emit(priority, prefix, level, msg)))
		__atomic_add_fetch(dropped, 1, __ATOMIC_RELAXED);
	else
		say_dropped();
	errno = saved;
}

static void peer_line(int priority, const char *prefix, const char *level, uint32_t peer_uid,
		      const char *fmt, va_list ap);

void log_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	/* In a user's request: errors that user can cause at will (an image
	 * that fails to read, a reader they trace) have a budget of their
	 * own, apart from the info and warning lines, so that they neither
	 * hide behind a flood of refusals nor flood the journal (whose rate
	 * limit would drop every user's lines). */
	if (ctx.peer_uid)
		peer_line(LOG_ERR, SD_ERR, "error", ctx.peer_uid, fmt, ap);
	else
		log_line(LOG_ERR, SD_ERR, "error", fmt, ap);
	va_end(ap);
}

void log_warning(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (ctx.peer_uid)
		peer_line(LOG_WARNING, SD_WARNING, "warning", ctx.peer_uid, fmt, ap);
	else
		log_line(LOG_WARNING, SD_WARNING, "warning", fmt, ap);
	va_end(ap);
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (ctx.peer_uid)
		peer_line(LOG_INFO, SD_INFO, "info", ctx.peer_uid, fmt, ap);
	else
		log_line(LOG_INFO, SD_INFO, "info", fmt, ap);
	va_end(ap);
}

/* A line of squashd's own, whatever the thread's context. */
static void plain_line(int priority, const char *prefix, const char *level, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void plain_line(int priority, const char *prefix, const char *level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(priority, prefix, level, fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (!__atomic_load_n(&log_debug_enabled, __ATOMIC_RELAXED))
		return;
	va_start(ap, fmt);
	log_line(LOG_DEBUG, SD_DEBUG, "debug", fmt, ap);
	va_end(ap);
}

static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_budget budget, error_budget;

/* A line about peer_uid's request, if its budget has one. */
static void peer_line(int priority, const char *prefix, const char *level, uint32_t peer_uid,
		      const char *fmt, va_list ap)
{
	struct timespec now;
	unsigned long left_out;
	bool take, shared;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&budget_lock);
	take = log_budget_take_from(priority == LOG_ERR ? &error_budget : &budget, peer_uid,
				    (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, &left_out, &shared);
	pthread_mutex_unlock(&budget_lock);
	if (!take)
		return;
	log_line(priority, prefix, level, fmt, ap);
	if (!left_out)
		return;
	char who[64] = "processes gone before squashd looked";
	if (peer_uid != PEER_USER_GONE)
		snprintf(who, sizeof(who), "uid %u", (unsigned)peer_uid);
	plain_line(LOG_WARNING, SD_WARNING, "warning",
		   "%lu more %slines about requests from %s%s were not logged (at most %d at "
		   "once, then one per %d s, per user)", left_out, priority == LOG_ERR ? "error " : "", who,
		   shared ? " and other users past the 128 busy ones, which share one budget" : "",
		   LOG_BUDGET_BURST, LOG_BUDGET_REFILL_MS / 1000);
}

void log_peer_warning(uint32_t peer_uid, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	peer_line(LOG_WARNING, SD_WARNING, "warning", peer_uid, fmt, ap);
	va_end(ap);
}

void log_peer_info(uint32_t peer_uid, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	peer_line(LOG_INFO, SD_INFO, "info", peer_uid, fmt, ap);
	va_end(ap);
}

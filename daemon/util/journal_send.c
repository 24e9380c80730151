#include "config.h"
#include "util/journal_send.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define JOURNAL_SOCKET "/run/systemd/journal/socket"
/* Far above any line squashd writes (a message, a path and a few
 * numbers), far below a datagram's limit. */
#define ENTRY_MAX (64 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int journal_fd = -1;
static pid_t journal_pid;

/* The socket of this process: a forked child may have closed the one it
 * inherited, and its number may name another file there (an answer
 * socket), so a child opens its own. A failed socket() is tried again at
 * the next entry. */
static int journal_socket(void)
{
	pid_t me = getpid();
	int fd;

	pthread_mutex_lock(&lock);
	if (journal_fd >= 0 && journal_pid != me)
		journal_fd = -1;
	if (journal_fd < 0) {
		journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		journal_pid = me;
	}
	fd = journal_fd;
	pthread_mutex_unlock(&lock);
	return fd;
}

/* The native protocol: "NAME=value\n", or, for a value holding a newline,
 * "NAME\n", its length as 64-bit little-endian, the value and "\n". */
static size_t serialize(const struct iovec *fields, size_t n, char *out, size_t cap)
{
	size_t used = 0;

	for (size_t i = 0; i < n; i++) {
		const char *f = fields[i].iov_base, *eq = memchr(f, '=', fields[i].iov_len);
		if (!eq)
			return 0;
		size_t name = (size_t)(eq - f), len = fields[i].iov_len - name - 1;
		bool binary = memchr(eq + 1, '\n', len) != NULL;
		if (used + name + len + 10 > cap)
			return 0;
		memcpy(out + used, f, name);
		used += name;
		if (binary) {
			uint64_t le = htole64((uint64_t)len);
			out[used++] = '\n';
			memcpy(out + used, &le, 8);
			used += 8;
		} else {
			out[used++] = '=';
		}
		memcpy(out + used, eq + 1, len);
		used += len;
		out[used++] = '\n';
	}
	return used;
}

enum journal_send journal_send(const struct iovec *fields, size_t n)
{
	return journal_send_at(JOURNAL_SOCKET, fields, n);
}

enum journal_send journal_send_at(const char *path, const struct iovec *fields, size_t n)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	size_t total = 0;
	int fd = journal_socket();

	if (fd < 0 || strlen(path) >= sizeof(addr.sun_path))
		return JOURNAL_UNAVAILABLE;
	memcpy(addr.sun_path, path, strlen(path) + 1);
	for (size_t i = 0; i < n; i++)
		total += fields[i].iov_len + 10;
	if (total > ENTRY_MAX)
		return JOURNAL_UNAVAILABLE;
	char *entry = malloc(total);
	size_t len = entry ? serialize(fields, n, entry, total) : 0;
	ssize_t sent = len ? sendto(fd, entry, len, MSG_DONTWAIT | MSG_NOSIGNAL,
				    (const struct sockaddr *)&addr, sizeof(addr))
			   : -1;
	int e = len ? errno : EINVAL;
	free(entry);
	if (sent == (ssize_t)len)
		return JOURNAL_SENT;
	return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS ? JOURNAL_BUSY : JOURNAL_UNAVAILABLE;
}

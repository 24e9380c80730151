/* The journal's native protocol without waiting (daemon/util/journal_send.c):
 * an entry arrives as one datagram in the protocol's form, a value with a
 * newline in its binary form; a socket nobody reads makes it say "busy"
 * instead of blocking (an alarm fails the test if it blocks); no socket:
 * "unavailable". */
#include "config.h"

#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/journal_send.h"
#include "unit.h"

#define FIELD(s) { (char *)(s), sizeof(s) - 1 }

int main(void)
{
	char dir[] = "/tmp/journal-send-XXXXXX", path[64], got[256], want[256];
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct iovec fields[] = { FIELD("MESSAGE=squashd: info: hello"), FIELD("PRIORITY=6"),
				  FIELD("IMAGE=/a\nb") };
	int fd;

	alarm(20);
	if (!mkdtemp(dir))
		return 99;
	snprintf(path, sizeof(path), "%s/socket", dir);
	memcpy(addr.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		return 99;

	CHECK_INT(journal_send_at(path, fields, 3), JOURNAL_SENT);
	ssize_t n = recv(fd, got, sizeof(got), 0);
	uint64_t len = htole64(4);
	size_t w = 0;
	const char *text = "MESSAGE=squashd: info: hello\nPRIORITY=6\nIMAGE\n";
	memcpy(want, text, strlen(text));
	w += strlen(text);
	memcpy(want + w, &len, 8);
	w += 8;
	memcpy(want + w, "/a\nb\n", 5);
	w += 5;
	CHECK_INT(n, (ssize_t)w);
	CHECK(n == (ssize_t)w && !memcmp(got, want, w));

	/* Nobody reads: the queue fills and the sender is told, never held. */
	enum journal_send r = JOURNAL_SENT;
	int sent = 0;
	while (sent < 100000 && (r = journal_send_at(path, fields, 2)) == JOURNAL_SENT)
		sent++;
	CHECK_INT(r, JOURNAL_BUSY);
	CHECK(sent > 0 && sent < 100000);
	recv(fd, got, sizeof(got), 0);
	CHECK_INT(journal_send_at(path, fields, 2), JOURNAL_SENT);

	/* A field without "=" is no entry; nobody listening is no journal. */
	struct iovec bad[] = { FIELD("MESSAGE") };
	CHECK_INT(journal_send_at(path, bad, 1), JOURNAL_UNAVAILABLE);
	close(fd);
	unlink(path);
	rmdir(dir);
	CHECK_INT(journal_send_at(path, fields, 2), JOURNAL_UNAVAILABLE);
	return unit_exit_code();
}

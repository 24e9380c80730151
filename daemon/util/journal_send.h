/* One entry to the journal's native socket, never waiting for journald:
 * it reads that socket alone, for every process of the node, so anyone
 * can keep it busy, and squashd logs while it holds locks that every
 * user's requests take. sd_journal_sendv() blocks on a full socket; this
 * says "busy" instead (docs/architecture.md, "Logging never waits"). */
#ifndef SQUASHD_JOURNAL_SEND_H
#define SQUASHD_JOURNAL_SEND_H

#include <stddef.h>
#include <sys/uio.h>

enum journal_send {
	JOURNAL_SENT,
	JOURNAL_BUSY,        /* journald has not read what it was sent: dropped */
	JOURNAL_UNAVAILABLE, /* no journald here (or an entry too large) */
};

/* Sends fields, each "NAME=value" (the value may hold any byte), as one
 * entry to journald. */
enum journal_send journal_send(const struct iovec *fields, size_t n);

/* The same to the datagram socket at path (for tests). */
enum journal_send journal_send_at(const char *path, const struct iovec *fields, size_t n);

#endif

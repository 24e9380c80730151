/* accept() when squashd is out of descriptors (EMFILE, ENFILE; issue 37).
 * A pending connection keeps the listening socket readable, so a plain
 * loop would poll and fail to accept at 100% CPU. Instead a reserve
 * descriptor (/dev/null) is given up to accept one connection, which is
 * read and answered that squashd is out of descriptors (connections.h,
 * CONNECTION_STARVED), and the listening socket
 * is left out of poll for ACCEPT_PAUSE_MS; the rest wait in the backlog.
 * The warning is logged at most once per ACCEPT_WARN_MS, with a count. */
#ifndef SQUASHD_ACCEPT_GUARD_H
#define SQUASHD_ACCEPT_GUARD_H

#include <stdbool.h>

#define ACCEPT_PAUSE_MS 100
#define ACCEPT_WARN_MS 10000

/* Opens the reserve descriptor when it is not open: before serving, and
 * whenever a descriptor may have been freed (cheap when it is open). */
void accept_guard_init(void);

/* Accepts one connection (non-blocking, close-on-exec). Returns its fd,
 * with *starved true when it was taken with the reserve (the caller
 * answers it, closes it, then calls accept_guard_refill), or
 * -1 when none is waiting or accepting must pause until
 * accept_guard_paused_until(). */
int accept_guarded(int listen_fd, bool *starved);
void accept_guard_refill(void);

/* Monotonic ms until which the listening socket is left alone; 0: none. */
long long accept_guard_paused_until(void);

#endif

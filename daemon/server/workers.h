/* squashd's main loop: the main thread listens on the socket, handles
 * signals, reads each connection's one request frame without blocking
 * (server/connections.h), queues it for the user it works for and starts
 * a worker thread for it when that user's share and the pool allow
 * (server/user_queues.h); the worker hands it to the server's table of
 * request kinds (server/server.h). Root is never refused; users take turns
 * for the workers. Out of descriptors, accepting pauses
 * (server/accept_guard.h). A stop wakes every wait, answers the queued
 * requests UNAVAILABLE and gives requests in progress a short grace
 * period; after a burst, freed memory goes back. */
#ifndef SQUASHD_WORKERS_H
#define SQUASHD_WORKERS_H

#include <stddef.h>

#include "core/daemon.h"

/* Creates the listening SOCK_SEQPACKET socket at path (mode 0666: any local
 * process may connect; policy decides what it may ask). Refuses to replace
 * a socket another squashd still answers on. Returns the fd or -1. */
int server_listen(const char *path, char *err, size_t errlen);

/* Blocks the signals the main loop reads (and SIGCHLD, SIGPIPE) in the
 * calling thread; call before starting any thread. */
void server_block_signals(void);

/* SIGHUP calls fn(arg) in the main loop (re-reading the settings). */
void server_on_reload(void (*fn)(void *arg), void *arg);

/* Serves until SIGTERM or SIGINT. Returns 0 on a clean stop. */
int server_run(int listen_fd, struct daemon_state *ds);

#endif

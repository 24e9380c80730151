/* squashd's worker manager: the main thread listens on the socket,
 * handles signals and starts a worker thread per connection, which reads
 * one request frame and hands it to the server's table of request kinds
 * (server/server.h). Root is never refused; other users get a fair share
 * of the workers. A stop wakes every wait and gives requests in progress a
 * short grace period; after a burst, freed memory goes back. */
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

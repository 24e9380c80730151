/* squashd's socket and event loop: accepts connections, reads one request
 * frame per connection, checks who sent it, dispatches, answers. Single
 * threaded: requests are served one at a time, which also serialises loop
 * device setup; every blocking step inside has its own time bound. */
#ifndef SQUASHD_SERVER_H
#define SQUASHD_SERVER_H

#include <stddef.h>

#include "job_mounts.h"

/* Creates the listening SOCK_SEQPACKET socket at path (mode 0666: any local
 * process may connect; policy decides what it may ask). Refuses to replace
 * a socket another squashd still answers on. Returns the fd or -1. */
int server_listen(const char *path, char *err, size_t errlen);

/* Serves until SIGTERM or SIGINT. Returns 0 on a clean stop. */
int server_run(int listen_fd, struct daemon_state *ds);

#endif

/* Users' FUSE servers that stay stopped, killed.
 *
 * squashd's node-level FUSE mounts are allow_other mounts in the host's
 * mount namespace (the job steps bind them from there). A request to a
 * server that is stopped (a user's SIGSTOP or ptrace stop of their own
 * reader) waits until it runs again, and root's requests are among them:
 * a df of every mount, the node's health check (which then times out and
 * drains the node), a backup's walk. So a server found stopped for
 * stopped_reader_timeout seconds is killed; its death is handled like any
 * other (mount/fuse_keep.h: a new reader takes the connection over and the
 * kernel resends what waited, or the mount fails for its jobs), and
 * nobody waits on it any more. */
#ifndef SQUASHD_STOPPED_READERS_H
#define SQUASHD_STOPPED_READERS_H

#include "core/daemon.h"

/* Looked at this often (and at the setting's changes at reload). */
#define STOPPED_READERS_CHECK_MS 1000

int stopped_readers_start(struct daemon_state *ds);
/* Ends the thread (after ds->stopping is set and broadcast). */
void stopped_readers_finish(void);

#endif

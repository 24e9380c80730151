/* The FUSE servers behind node-level mounts, watched through their pidfds
 * (process/process_watch.h). A server that dies while its mount is in use
 * marks the mount DEAD: it is detached, never shared again, holders learn
 * why at their next step, the next job gets a fresh mount, and health
 * reports it. */
#ifndef SQUASHD_FUSE_SERVERS_H
#define SQUASHD_FUSE_SERVERS_H

#include "core/daemon.h"

/* Watches the FUSE server of mount m (lock held; m->server_pidfd valid). */
void fuse_servers_watch_locked(struct daemon_state *ds, struct mount_entry *m);

/* m's server died (how: "exited with status 1", ...): the mount is dead
 * (lock held). Forgotten at once when nobody holds it. Its detach (and
 * its directory's removal) is queued on td, for after the lock: a reader
 * serves up to 512 mounts, and each detach propagates to every namespace
 * that holds a copy. The caller saves (once for all of a reader's
 * mounts). */
void fuse_servers_mark_dead_locked(struct daemon_state *ds, struct mount_entry *m, const char *how,
				   struct teardown *td);

#endif

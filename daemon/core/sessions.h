/* squash-shell sessions' binds: squashd binds each image of a session at
 * sessions_dir/PID/I for the session's user, and the command's own user
 * and mount namespace copies them (docs/architecture.md, "squash-shell").
 * The directory is root's and stays so; one POSIX ACL entry lets the
 * session's user alone enter it. */
#ifndef SQUASHD_SESSIONS_H
#define SQUASHD_SESSIONS_H

#include <stddef.h>
#include <sys/types.h>

#include "core/daemon.h"

/* Binds e's mounts (lock not held; e is complete and held) and names the
 * directory in dir. Returns 0, or -1 with err (nothing is left then). */
int sessions_bind(const struct daemon_state *ds, const struct job_entry *e, char *dir,
		  size_t dirlen, char *err, size_t errlen);

/* Undoes the binds of pid's session and its directory, now: for a session
 * never handed out (a refused request, an earlier process's leftovers). */
void sessions_unbind(const struct daemon_state *ds, pid_t pid);

/* For an ended session (lock held): moves its directory aside and queues
 * its binds' detach on td, to run after the lock is let go
 * (sharing_teardown): up to one detach per image, each propagated to
 * every namespace the bind reached, is kernel work nobody else's request
 * should wait behind. */
void sessions_queue_unbind(const struct daemon_state *ds, pid_t pid, struct teardown *td);

/* Removes the session directories no session of the registry owns, and
 * those of ended sessions a stop left behind (lock
 * held; adoption). */
void sessions_remove_unknown_locked(struct daemon_state *ds);

#endif

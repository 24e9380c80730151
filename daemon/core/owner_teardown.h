/* A teardown handed to its owner's thread (process/user_executor.h):
 * unmounting waits on the mount's FUSE server, up to request_timeout when
 * its user stopped it, so threads every user shares (the linger timer,
 * gc's periodic pass) never unmount themselves. */
#ifndef SQUASHD_OWNER_TEARDOWN_H
#define SQUASHD_OWNER_TEARDOWN_H

#include <sys/types.h>

#include "core/daemon.h"

/* Runs sharing_teardown(ds, td) on owner's thread, with a settings
 * snapshot of its own; td is empty afterwards (its cfg stays the
 * caller's). Runs it here when no thread can be had. */
void owner_teardown(struct daemon_state *ds, struct teardown *td, uid_t owner);

/* Hands each owner's share of td's mounts to owner_teardown (kernel
 * mounts: MOUNT_OWNER_ANY's thread), so that a teardown made of several
 * users' mounts never waits for one user's reader before another's.
 * td's overlay directories are removed here first: their lower layers are
 * among the mounts, and removing one waits on no user's process. td is
 * empty afterwards. */
void owners_teardown(struct daemon_state *ds, struct teardown *td);

#endif

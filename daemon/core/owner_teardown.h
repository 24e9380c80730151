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

#endif

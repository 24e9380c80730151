/* Ending a FUSE mount's connection from outside (fusectl's abort file):
 * every request waiting on it fails at once. Killing a server ends its
 * connection only when it held the last /dev/fuse descriptor of it; a user
 * may keep a copy of their own server's (pidfd_getfd: squashfuse_ll is
 * traceable by its user), and a child of squashd's waiting on the mount (the
 * mount's probe, a look at a lower layer's root) would then wait for ever.
 * For mounts squashd gives up on and does not keep to restart. */
#ifndef SQUASHD_FUSE_ABORT_H
#define SQUASHD_FUSE_ABORT_H

#include <stdbool.h>

/* Aborts the connection of the FUSE mount whose root is mount_point, asking
 * its server nothing; false (logged) when it is no FUSE mount root or the
 * abort failed. Call it before the mount is detached. */
bool fuse_abort_mount(const char *mount_point);

#endif

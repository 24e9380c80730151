/* squashd's mount directories (STATE_DIR/mnt, STATE_DIR/sessions) as
 * private mounts of their own. Under a shared /run every mount squashd
 * made below them propagated to every namespace that receives /run's
 * mounts, a user's `unshare -Urm` among them, and the kernel charges
 * each copy to the receiving namespace: one user who filled a namespace
 * of theirs to fs.mount-max made every mount squashd made for anyone fail
 * with ENOSPC, for as long as that namespace lived. Nothing needs the
 * propagation: steps take the node's mounts from squashd's namespace
 * (open_tree), and squash-shell runs in it. */
#ifndef SQUASHD_PRIVATE_ROOTS_H
#define SQUASHD_PRIVATE_ROOTS_H

#include <stddef.h>

/* Makes dir a private mount: bound onto itself when it is no mount yet,
 * then MS_PRIVATE. Must run before users' namespaces copy it, so at
 * start. A dir that is no mount but has mounts below it (an older
 * squashd's, kept for running jobs over an upgrade) is left as it is,
 * since binding over it would hide them: 1, to be tried again once they
 * are gone. Returns 0, 1, or -1 with why. */
int private_root_make(const char *dir, char *why, size_t whylen);

/* At a stop: unbinds dir when it is such a mount (a bind of the file
 * system it lies on, not one the admin mounted there) and nothing is
 * mounted below it (jobs and sessions may keep theirs over a restart). */
void private_root_release(const char *dir);

#endif

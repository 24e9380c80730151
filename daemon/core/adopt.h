/* After a restart: squashd read its registry back (registry/state_file.h)
 * and adopts what outlived the last squashd. Mounts that are still mounted
 * and served are kept (their FUSE servers watched again), vanished ones
 * are forgotten and their jobs told why, anything in the mount directory
 * the registry does not know is unmounted; steps and sessions whose
 * process still runs are watched again, the others released. What they
 * held is unmounted on its owner's thread, after squashd starts serving:
 * a reader stopped by its user delays nobody else's start. */
#ifndef SQUASHD_ADOPT_H
#define SQUASHD_ADOPT_H

#include "core/daemon.h"

/* Before serving (lock not held). */
void adopt_registry(struct daemon_state *ds, const struct squashd_config *cfg);

#endif

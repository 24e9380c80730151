/* The check that a new FUSE mount answers: a process stats the mount
 * point; the first request its server answers proves the mount works.
 * A process, not a thread, because a server that never answers leaves it
 * stuck, and a process can be killed. The spawner forks it when it runs
 * (process/spawner.h), squashd otherwise. */
#ifndef SQUASHD_FUSE_PROBE_H
#define SQUASHD_FUSE_PROBE_H

#include <stdbool.h>

#include "process/spawner.h"

struct fuse_probe {
	int fd;      /* poll for POLLIN: the answer socket, or our child's pidfd */
	int pidfd;   /* to kill it; -1 until the spawner sent it */
	bool spawned;
};

/* Starts the probe of mountpoint. Returns 0, or -1 with errno. */
int fuse_probe_start(struct fuse_probe *p, const char *mountpoint);

/* After p->fd polled readable: 1 when the probe is done, with a wait(2)
 * status in *status (exit 0: the mount answers; exit 255: something else
 * is mounted there; another exit: the errno that failed), 0 when it is
 * not done yet. The probe is gone after 1. */
int fuse_probe_done(struct fuse_probe *p, int *status);

/* Kills the probe and forgets it. */
void fuse_probe_abandon(struct fuse_probe *p);

/* The probe as the spawner runs it (register as SPAWNER_FUSE_PROBE). */
extern const struct spawner_op fuse_probe_spawner_op;

#endif

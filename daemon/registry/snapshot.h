/* A copy of what the state file keeps of a registry, taken under the
 * daemon's lock (core/daemon.c) so that formatting, escaping and writing
 * it run without the lock: a copy is plain memory copies, the text costs
 * printf and escaping per byte and the write an fsync. */
#ifndef SQUASHD_REGISTRY_SNAPSHOT_H
#define SQUASHD_REGISTRY_SNAPSHOT_H

#include "registry/registry.h"

/* The mounts and entries of r the state file keeps (state_file.h), with
 * their references among themselves; NULL when out of memory. */
struct registry *registry_snapshot(const struct registry *r);
void registry_snapshot_free(struct registry *s);

#endif

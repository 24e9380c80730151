/* Merge groups: images of one holder (job, step or session) that share a
 * target form one read-only tree there, a later image over an earlier one
 * where paths collide. Each image is mounted (or shared) by the normal
 * rules (core/sharing.h); the merged view is a node-level overlayfs mount
 * of those mounts (mount/overlay_lowers.h), itself a registry mount
 * (key.mode MOUNT_MODE_MERGED, lowers set) shared by every holder that
 * merges the same image mounts in the same order, refcounted once per
 * image of the group, and torn down before its lowers. */
#ifndef SQUASHD_MERGE_H
#define SQUASHD_MERGE_H

#include <stddef.h>

#include "core/daemon.h"
#include "util/result.h"

/* Gives every merge group of e (pending, its images mounted; unlocked) its
 * merged mount, made or shared: e->images[i].merged, one reference per
 * image of the group. On failure err says why; what e got so far is kept
 * (and let go with e). */
enum result merge_mount_groups(struct daemon_state *ds, const struct squashd_config *cfg,
			       struct job_entry *e, char *err, size_t errlen, long long deadline_ms);

/* After a restart (lock held): links each holder's merge groups to the
 * merged mounts read back from the state file, which records no links. A
 * group whose merged mount is gone fails its job (its steps say so). */
void merge_relink_locked(struct daemon_state *ds);

/* Where holders bind image i of e: its merged mount, else its own. */
const struct mount_entry *merge_source(const struct job_entry *e, size_t i);

#endif

/* Writable overlays (IMAGE:TARGET:rw): per job and node, one tmpfs of
 * overlay_size bytes (squashd.conf) in squashd's private mount directory,
 * STATE_DIR/mnt/jN, holding for each writable image i an upper (uI) and a
 * work (wI) directory and the overlay's mount point oI, whose lower layer
 * is the image's node-level mount. Steps bind oI read-write on the target,
 * so all steps of the job on the node share it; the image never changes;
 * the tmpfs' size limit gives writers ENOSPC; the whole directory goes
 * when the job is released, before the node-level mounts below it. */
#ifndef SQUASHD_OVERLAY_H
#define SQUASHD_OVERLAY_H

#include <stdbool.h>

#include "core/daemon.h"
#include "util/result.h"

/* Mounts the overlays of job's writable images (unlocked; the job is
 * pending and its images are mounted). RESULT_OK also when it has none;
 * on failure nothing is left and err says why. Gives up at deadline_ms
 * on a lower whose FUSE server does not answer: kills that server, and
 * removes what the mount made once it returns. */
enum result overlay_job_mount(struct daemon_state *ds, const struct squashd_config *cfg,
			      struct job_entry *job, char *err, size_t errlen, long long deadline_ms);

/* Moves job's overlay directory to td, to be torn down after the answer
 * and before td's mounts (ds->lock held). */
void overlay_queue_teardown(struct job_entry *job, struct teardown *td);

/* Unmounts the overlays and the tmpfs at dir and removes it (unlocked).
 * Also for leftovers of an earlier squashd. */
void overlay_remove_dir(const char *dir, int timeout_ms);

/* Whether every overlay of job is still mounted (adoption). */
bool overlay_job_intact(const struct job_entry *job);

/* Whether name, an entry of the mount directory, is a job's overlay
 * directory (not a node-level mount). */
bool overlay_dir_name(const char *name);

#endif

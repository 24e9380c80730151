/* The sharing engine: one node-level mount per image per sharing domain
 * (registry/registry.h, struct mount_key), refcounted by the job, step and
 * session images that hold it. A request that finds the image being
 * mounted waits for that mount and shares it or its failure; the last
 * reference lets the mount linger (registry/linger.h) or queues it on a
 * struct teardown, unmounted after the answer. */
#ifndef SQUASHD_SHARING_H
#define SQUASHD_SHARING_H

#include <stddef.h>

#include "core/daemon.h"
#include "process/identity.h"
#include "util/result.h"

/* Mounts or shares spec's image for a holder with identity id (unlocked).
 * On RESULT_OK *out holds one more reference for the caller; otherwise err
 * says why, for the user. Gives up at deadline_ms. */
enum result sharing_get(struct daemon_state *ds, const struct squashd_config *cfg,
			const struct identity *id, const Squash__ImageSpec *spec,
			struct mount_entry **out, char *err, size_t errlen, long long deadline_ms);

/* Its two halves. sharing_open opens spec's image as the user and checks
 * it (the trust policy decides its mode); on RESULT_OK fills fd and the
 * sharing key. sharing_get_opened mounts or shares it and closes fd. */
enum result sharing_open(const struct squashd_config *cfg, const struct identity *id,
			 const Squash__ImageSpec *spec, int *fd, struct mount_key *key, char *err,
			 size_t errlen, long long deadline_ms);
enum result sharing_get_opened(struct daemon_state *ds, const struct squashd_config *cfg,
			       const struct identity *id, const Squash__ImageSpec *spec, int fd,
			       const struct mount_key *key, struct mount_entry **out, char *err,
			       size_t errlen, long long deadline_ms);

/* Takes a mount that find(registry, what) names, to share it (lock held):
 * waits while it is being mounted, takes a lingering one over. 1 with
 * *out referenced, 0 when there is none, -1 with err and *res (its
 * failure, or waiting gave up). image names it in messages. */
int sharing_take_locked(struct daemon_state *ds, const struct squashd_config *cfg,
			struct mount_entry *(*find)(struct registry *, const void *),
			const void *what, const char *image, struct mount_entry **out,
			enum result *res, char *err, size_t errlen, long long deadline_ms);

/* A new mount m (MOUNTING) was made (lock held): READY, served by server
 * (0: none; its pidfd and kept connection now m's), whose death is
 * watched. The caller wakes the requests waiting on it. */
void sharing_ready_locked(struct daemon_state *ds, struct mount_entry *m, pid_t server,
			  int server_pidfd, struct fuse_keep *keep);

/* A new mount m (MOUNTING, the caller's reference) could not be made
 * (lock held): FAILED with err for the requests waiting on it, its mount
 * point removed, the caller's reference dropped. The caller wakes them. */
void sharing_failed_locked(struct daemon_state *ds, const struct squashd_config *cfg,
			   struct mount_entry *m, enum result res, const char *err);

/* Drops one reference (lock held). The last one of a ready mount makes it
 * linger (td->cfg's linger) or queues it on td; failed and dead mounts are
 * forgotten at once. A merged mount lets go of its lowers when it is gone
 * (after its unmount). m may be NULL. */
void sharing_put_locked(struct daemon_state *ds, struct mount_entry *m, struct teardown *td);

/* Unmounts what td holds (unlocked), forgets it and saves; td is empty
 * afterwards. */
void sharing_teardown(struct daemon_state *ds, struct teardown *td);

/* The node-level mount after prev (NULL: the first), in every state (lock
 * held). For describing the state. */
const struct mount_entry *sharing_next_mount_locked(const struct daemon_state *ds,
						    const struct mount_entry *prev);

#endif

/* Descriptors and mounts squashd holds for one user (issue 37): a FUSE
 * mount keeps its server's pidfd, the /dev/fuse connection kept to restart
 * the server and its images' descriptors (mount/fuse_keep.h), about three
 * a mount, for as long as it is mounted (lingering too). One user's many
 * sessions of many images would otherwise exhaust squashd's RLIMIT_NOFILE
 * for every user of the node. max_fds_per_user bounds them; its default
 * (0) is a quarter of squashd's soft RLIMIT_NOFILE, read when asked, so at
 * least three quarters stay for everyone else and for squashd itself. */
#ifndef SQUASHD_USER_FDS_H
#define SQUASHD_USER_FDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/daemon.h"
#include "core/user_budgets.h"

/* What a new mount is counted at before it is made: a FUSE mount of one
 * image (its server's pidfd, the kept connection, the image). */
#define USER_FDS_PER_NEW_MOUNT 3
/* The default limit: this fraction of the soft RLIMIT_NOFILE. */
#define USER_FDS_DEFAULT_DIVISOR 4

/* The limit in force (cfg's, or the default derived from RLIMIT_NOFILE). */
uint64_t user_fds_limit(const struct squashd_config *cfg);

/* Reserves room for n_images new mounts of uid (uid 0: never counted):
 * false, with err for the user, when what squashd holds for uid, what
 * requests in progress reserved and n_images * USER_FDS_PER_NEW_MOUNT
 * pass the limit. On true, give the reservation back with
 * user_fds_unreserve(uid, *reserved) once the request is done. */
bool user_fds_reserve(struct daemon_state *ds, const struct squashd_config *cfg, uid_t uid,
		      unsigned n_images, uint64_t *reserved, char *err, size_t errlen);
void user_fds_unreserve(uid_t uid, uint64_t reserved);

/* The status rows "descriptors" and "mounts" of every user holding some. */
void user_fds_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
			  user_budget_emit emit, void *arg);

#endif

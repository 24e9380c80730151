/* One user's share of the node's FUSE mount table (issue 37). A
 * non-root user's fusermount refuses to mount once the table lists
 * fusermount's mount_max FUSE file systems (settings/fuse_conf.h; 1000
 * by default), all users' together. squashd's FUSE mounts of a user's
 * images (lingering ones included) and the binds of them that the user's
 * squash-shell sessions make are in that count, on the node and in every
 * namespace copied from it (a job step's, a container's). Unbounded, one
 * user's images would stop every other user's own FUSE mounts (sshfs,
 * squashfuse, Apptainer's and enroot's) on that node; so each user gets
 * max_fuse_mounts_per_user of them, by default a quarter of mount_max. */
#ifndef SQUASHD_USER_FUSE_MOUNTS_H
#define SQUASHD_USER_FUSE_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/daemon.h"
#include "core/user_budgets.h"

#define USER_FUSE_MOUNTS_DIVISOR 4

/* The share in force: the setting, else mount_max / 4 (at least one); 0
 * (no bound) when fusermount sets no limit. */
unsigned user_fuse_mounts_limit(const struct squashd_config *cfg);

/* The FUSE entries uid's images put in the node's table (lock held):
 * uid's FUSE mounts in any state but failed (those being made too, so
 * requests at once are counted exactly), and each image of uid's
 * sessions bound from one of them. */
unsigned user_fuse_mounts_locked(struct daemon_state *ds, uid_t uid);

/* Whether adding one more FUSE entry for uid (root: never refused) would
 * pass its share; why says so, naming the setting (lock held: the
 * caller records the entry under the same hold). Sharing a mount that
 * exists adds no entry and is never asked about. */
bool user_fuse_mounts_refuses_locked(struct daemon_state *ds, const struct squashd_config *cfg,
				     uid_t uid, char *why, size_t whylen);

/* Whether the FUSE file systems in squashd's mount table (every user's
 * own, squashd's, their binds) fill nine tenths of fusermount's
 * mount_max or more: then users' own fusermount fails, or soon will,
 * whoever holds them (each user's share is a quarter: several users at
 * once, or mounts outside squashd). Fills problem for squashctl health.
 * Reads squashd's mountinfo: for root's status only. */
bool fuse_table_nearly_full(const struct squashd_config *cfg, char *problem, size_t len);

/* The status row "FUSE mounts" of every user with some (takes the lock). */
void user_fuse_mounts_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
				  user_budget_emit emit, void *arg);

#endif

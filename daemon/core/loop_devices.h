/* squashd's use of loop devices: the max_loop_devices limit on kernel
 * mounts, and the health check that a kernel mount could get a device. */
#ifndef SQUASHD_LOOP_DEVICES_H
#define SQUASHD_LOOP_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/daemon.h"

/* Kernel mounts squashd holds or is making, lingering ones only when
 * lingering (lock held). */
unsigned loop_devices_in_use_locked(struct daemon_state *ds, bool lingering);

/* Whether kernel mount m (MOUNTING, in the registry) must not get a loop
 * device because max_loop_devices others hold one; why says so. Lingering
 * mounts count, and give their devices up before a mount is refused,
 * earliest expiry first, as many as it needs (none when the mounts in use,
 * unmounting ones included, fill the limit alone): they are moved to td
 * (UNMOUNTING), which the caller tears down before mounting. So the limit
 * bounds the devices squashd holds. (A lingering merged mount keeps its
 * kernel lowers, which it holds.) Takes the lock. */
bool loop_devices_refuse(struct daemon_state *ds, const struct squashd_config *cfg,
			 const struct mount_entry *m, struct teardown *td, char *why, size_t whylen);

/* One user's share of the loop devices (docs/security.md): the
 * max_loop_devices_per_user setting, or this fraction of max_loop_devices
 * (at least one), or, with neither set, LOOP_DEVICES_USER_DEFAULT: the
 * kernel gives loop devices as long as asked, and each pins a device and
 * a squashfs super block outside the user's memory cgroup, so one user
 * must not take them without end. The most images one job may have. */
#define LOOP_DEVICES_USER_DIVISOR 4
#define LOOP_DEVICES_USER_DEFAULT 1024
unsigned loop_devices_user_limit(const struct squashd_config *cfg);

/* The distinct kernel mounts uid's jobs, steps and sessions hold, and
 * those being made for uid (lock held). Mounts shared with other users
 * count for each of them; lingering ones, which no holder holds, for
 * nobody. */
unsigned loop_devices_of_user_locked(struct daemon_state *ds, uid_t uid);

/* Whether a new kernel mount for uid (root: never) must be refused
 * because uid holds its share already; why says so, for the user (lock
 * held: the caller records the mount it makes, mounting_for = uid, under
 * the same hold, so that requests at once are counted exactly). Sharing a
 * mount that exists needs no device and is never refused. */
bool loop_devices_user_refuses_locked(struct daemon_state *ds, const struct squashd_config *cfg,
				      uid_t uid, char *why, size_t whylen);

/* Whether the next kernel mount would find no loop device: squashd is at
 * max_loop_devices (lock held by the caller for that count: in_use), or the
 * kernel has no free device and cannot create one (LOOP_CTL_GET_FREE
 * fails, or its device has no node in /dev, as in a container with a fixed
 * /dev). Fills problem when exhausted. Never takes a device. */
bool loop_devices_exhausted(const struct squashd_config *cfg, unsigned in_use, char *problem,
			    size_t len);

#endif

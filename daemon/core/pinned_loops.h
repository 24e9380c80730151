/* Loop devices still attached after squashd unmounted their kernel mount.
 *
 * squashd's unmount, and the removal of its mount point, detach the mount
 * wherever it sits on that directory, in every namespace. A copy anywhere
 * else keeps the squashfs, and with it its autoclear loop device: a user's
 * own namespace holding a squash-shell session's bind at the target, kept
 * alive by a process of theirs or a descriptor of the namespace. squashd
 * cannot take that back (docs/security.md), so it counts it: each such
 * device counts against the node's max_loop_devices and against
 * max_loop_devices_per_user of the users whose sessions held the mount
 * (how such a copy is made), until the kernel detaches it, which every
 * count looks at again (at most once a second), and squashctl health says
 * so as a note. An open file of the image that outlives its job keeps the
 * device too: counted for the node only, as no session held it. Past
 * PINNED_LOOPS_MAX devices, the counts hold (core/pinned_table.h). Not
 * kept across a restart of squashd. */
#ifndef SQUASHD_PINNED_LOOPS_H
#define SQUASHD_PINNED_LOOPS_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/daemon.h"
#include "core/pinned_table.h"
#include "core/user_budgets.h"

/* Attached this long after the unmount: worth a note (the kernel may
 * detach a device a moment after its last unmount). */
#define PINNED_LOOPS_NOTE_MS 5000

/* After kernel mount m's unmount (lock not held; m not yet forgotten):
 * remembers its loop device, with the users whose sessions held m, when
 * the device is still attached. */
void pinned_loops_note(const struct mount_entry *m);

/* The devices remembered and still attached, and those of them charged to
 * uid (lock held: a device squashd attached again for a mount of its own is
 * that mount's, and forgotten here). */
unsigned pinned_loops_count_locked(struct daemon_state *ds);
unsigned pinned_loops_of_user_locked(struct daemon_state *ds, uid_t uid);

/* "kernel mounts kept after unmount" per user charged any (no limit of
 * its own: they count in "kernel mounts", against max_loop_devices_per_user;
 * core/user_budgets.h). Takes the lock. */
void pinned_loops_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
			      user_budget_emit emit, void *arg);

/* One line per device attached PINNED_LOOPS_NOTE_MS after its unmount
 * (lock held), for squashctl health's notes. */
void pinned_loops_notes_locked(struct daemon_state *ds, void (*say)(void *arg, const char *line),
			       void *arg);

#endif

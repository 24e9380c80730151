/* The bookkeeping of loop devices still attached after their unmount
 * (core/pinned_loops.h looks at the devices; this keeps the counts). The
 * table is bounded; when it is full, a device is forgotten by name but
 * never by count: the entry dropped is the oldest of the user charged
 * with the most devices, and that device keeps counting, for the node and
 * for the users it was charged to, until squashd restarts. So a user
 * whose copies fill the table pays for it, and neither their share nor
 * the node's limit stops holding (a table that forgot the oldest device
 * lowered its users' counts, and anyone could go on pinning). */
#ifndef SQUASHD_PINNED_TABLE_H
#define SQUASHD_PINNED_TABLE_H

#include <stdbool.h>
#include <sys/types.h>

#include "registry/registry.h"

/* Devices remembered by name at once. */
#define PINNED_LOOPS_MAX 1024
/* Users charged with forgotten devices: past that, a further user's
 * forgotten devices count for the node only. */
#define PINNED_FORGOTTEN_USERS_MAX (PINNED_LOOPS_MAX * MOUNT_SESSION_UIDS)

struct pinned {
	char device[32];        /* /dev/loopN */
	char backing[256];      /* what sysfs said it was attached to, cut */
	char image[256];        /* the image, for the note, cut */
	uid_t uids[MOUNT_SESSION_UIDS];
	unsigned n_uids;
	long long since_ms;     /* its unmount */
};

/* Devices forgotten by name, still counted. */
struct pinned_forgotten {
	uid_t uid;
	unsigned n;
};

struct pinned_table {
	struct pinned e[PINNED_LOOPS_MAX];
	unsigned n;
	struct pinned_forgotten forgotten[PINNED_FORGOTTEN_USERS_MAX];
	unsigned n_forgotten;      /* users in forgotten[] */
	unsigned forgotten_node;   /* devices forgotten by name, for the node */
};

/* Remembers p (a device of the same name is replaced). When the table is
 * full, forgets by name the oldest device of the user charged with the
 * most (the oldest device when none is charged to a user), keeping its
 * count. Returns the device forgotten by name, or NULL (valid until the
 * next change of t). */
const char *pinned_table_add(struct pinned_table *t, const struct pinned *p);

/* Forgets entry i: its device is detached (or squashd's own again). */
void pinned_table_remove(struct pinned_table *t, unsigned i);

/* Devices counted: for the node, and charged to uid. */
unsigned pinned_table_count(const struct pinned_table *t);
unsigned pinned_table_of_user(const struct pinned_table *t, uid_t uid);

/* Every user charged any device and how many, up to max of them, into
 * uids[] and counts[]. Returns how many were written. */
unsigned pinned_table_users(const struct pinned_table *t, uid_t *uids, unsigned *counts, unsigned max);

#endif

/* Whether a process outside squashd's mount namespace still uses one of
 * its node-level mounts: a step's bind, or a copy made private. Copies
 * that mount propagation keeps in step with squashd's mount (a peer, or a
 * slave such as a systemd service's PrivateTmp namespace) are not users:
 * squashd's unmount removes them. Reads /proc/PID/mountinfo, once per
 * mount namespace. */
#ifndef SQUASHD_MOUNT_USERS_H
#define SQUASHD_MOUNT_USERS_H

#include <stddef.h>
#include <sys/types.h>

/* What identifies a mount in other namespaces: its device ("major:minor")
 * and its peer group (0 when it propagates nowhere). */
struct mount_identity {
	char dev[32];
	unsigned long peer_group;
};

/* The whole of a (proc) file, up to max bytes, NUL-terminated; NULL when
 * it cannot be read. */
char *mount_users_read_file(const char *path, size_t max);

/* The identity of the mount at path in mountinfo (the text of squashd's
 * own /proc/self/mountinfo); dev "" when there is none. */
void mount_users_identity(const char *mountinfo, const char *path, struct mount_identity *id);

/* A process in another mount namespace that holds a mount of id's device
 * that propagation does not remove with ours; its pid, or 0. */
pid_t mount_users_find(const struct mount_identity *id);

#endif

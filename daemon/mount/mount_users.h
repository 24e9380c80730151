/* Whether a process outside squashd's mount namespace still uses one of
 * its node-level mounts: a step's bind, or a copy made private. Copies
 * that mount propagation keeps in step with squashd's mount (a peer, or a
 * slave such as a systemd service's PrivateTmp namespace) are not users:
 * squashd's unmount removes them. Reads /proc/PID/mountinfo, once per
 * mount namespace and question round. */
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

/* One of squashd's mounts asked about. A copy at point itself in another
 * namespace was made by cloning the node's namespace after the mount (a
 * user's `unshare -Urm`, a squash-shell session), not by binding it for
 * a job: no use (squashd's removal of the mount point detaches it). The
 * processes that can use it for its holder are root's (slurmstepd) and
 * uid's (the holder's user). */
struct mount_use_query {
	struct mount_identity id;
	const char *point;
	uid_t uid;
	pid_t user; /* answer: a pid that uses it, 0 none, -1 not known (kept) */
};

/* Answers the n queries in one walk of /proc, reading each mount
 * namespace of a process of root or of a queried uid once (other users'
 * namespaces never); at most budget_per_uid bytes of mountinfo in all
 * per uid but root (0: no bound). Past a uid's budget its unanswered
 * queries get -1: a user's namespaces cost their own jobs, never
 * another's. */
void mount_users_find_all(struct mount_use_query *q, size_t n, size_t budget_per_uid);

#endif

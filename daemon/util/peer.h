/* Who is on the other end of a connection, from the kernel (SO_PEERCRED),
 * and which user answers for it. */
#ifndef SQUASHD_PEER_H
#define SQUASHD_PEER_H

#include <sys/socket.h>
#include <sys/types.h>

/* peer.user of a process that was gone before it could be looked at. */
/* Not (uid_t)-1, which is the node's own work elsewhere (kernel mounts'
 * owner): the lines and silent connections of peers gone before squashd
 * looked share one budget with nothing else; their requests are refused
 * (server/workers.c), as they would count for no user. */
#define PEER_USER_GONE ((uid_t)-2)

struct peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	/* The user whose budgets (log lines, silent connections) the peer
	 * draws on: uid itself, except in a user namespace that a user made:
	 * then that user, the owner of the outermost namespace below
	 * squashd's. A user's subordinate uid range (rootless containers:
	 * 65,536 uids) is then one user, not 65,536. PEER_USER_GONE when the
	 * process had exited (its namespace cannot be known). */
	uid_t user;
};

/* Returns 0 or -1 (errno). */
int peer_identify(int fd, struct peer *peer);

/* The user answering for process pid of uid (peer.user). */
uid_t peer_user_of(pid_t pid, uid_t uid);

#endif

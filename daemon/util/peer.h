/* Who is on the other end of a connection, from the kernel (SO_PEERCRED). */
#ifndef SQUASHD_PEER_H
#define SQUASHD_PEER_H

#include <sys/socket.h>
#include <sys/types.h>

struct peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/* Returns 0 or -1 (errno). */
int peer_identify(int fd, struct peer *peer);

#endif

#include "config.h"
#include "util/peer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The kernel nests user namespaces at most 32 deep. */
#define USERNS_DEPTH_MAX 33

static bool same_ns(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The owner of the outermost user namespace on the way from nsfd up to
 * ours (nsfd is closed); uid when the way cannot be walked. */
static uid_t outermost_owner(int nsfd, const struct stat *ours, uid_t uid)
{
	for (int depth = 0; depth < USERNS_DEPTH_MAX; depth++) {
		struct stat st;
		int parent = ioctl(nsfd, NS_GET_PARENT);

		if (parent < 0 || fstat(parent, &st) < 0) {
			if (parent >= 0)
				close(parent);
			break;
		}
		if (same_ns(&st, ours)) {
			uid_t owner;
			close(parent);
			int r = ioctl(nsfd, NS_GET_OWNER_UID, &owner);
			close(nsfd);
			/* A namespace root made (a container runtime's, a
			 * service's PrivateUsers=) is nobody's range: its
			 * processes answer for themselves. */
			return r == 0 && owner != 0 ? owner : uid;
		}
		close(nsfd);
		nsfd = parent;
	}
	close(nsfd);
	return uid;
}

/* squashd's own user namespace (the node's, when it runs as a service). */
static struct stat ours;
static bool have_ours;
static pthread_once_t ours_once = PTHREAD_ONCE_INIT;

static void find_ours(void)
{
	have_ours = stat("/proc/self/ns/user", &ours) == 0;
}

uid_t peer_user_of(pid_t pid, uid_t uid)
{
	char path[64];
	struct stat st;

	if (uid == 0)
		return 0;
	pthread_once(&ours_once, find_ours);
	/* A pid reused since the connect names another process: its lines
	 * then count for its user. Looked at right after the accept, so a
	 * user cannot time that; what a user can do is exit at once, and
	 * such peers share one budget (PEER_USER_GONE). */
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	int nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		return errno == ENOENT || errno == ESRCH ? PEER_USER_GONE : uid;
	if (!have_ours || fstat(nsfd, &st) < 0 || same_ns(&st, &ours)) {
		close(nsfd);
		return uid;
	}
	return outermost_owner(nsfd, &ours, uid);
}

int peer_identify(int fd, struct peer *peer)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -1;
	peer->pid = cred.pid;
	peer->uid = cred.uid;
	peer->gid = cred.gid;
	peer->user = peer_user_of(cred.pid, cred.uid);
	return 0;
}

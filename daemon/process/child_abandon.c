/* Giving up on a child (child_process.h): the process watcher, which sits
 * above the waiting primitives, reaps it whenever it exits. */
#include "config.h"

#include <unistd.h>

#include "process/child_process.h"
#include "process/process_watch.h"
#include "util/log.h"

void child_abandon(int pidfd)
{
	if (pidfd < 0)
		return;
	child_kill(pidfd);
	/* The watcher reaps it whenever it exits; nobody waits for it. */
	if (process_watch_add(pidfd, 0, 0, NULL, NULL) < 0) {
		log_warning("cannot watch an abandoned child; it stays a zombie until squashd exits");
		close(pidfd);
	}
}

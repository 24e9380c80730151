/* Telling a process that exited from one that runs by its pidfd
 * (daemon/process/child_process.c, child_exited): a reader's death is
 * handled later, on its user's thread, when its pid may be another
 * process's; only its pidfd says which. Exited before it is reaped too;
 * a pidfd of -1 (not known) counts as exited. No root needed. */
#include "config.h"

#include <sys/wait.h>
#include <unistd.h>

#include "process/child_process.h"
#include "unit.h"

int main(void)
{
	int p[2];
	char c;

	CHECK_INT(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[1]);
		(void)!read(p[0], &c, 1);
		_exit(0);
	}
	close(p[0]);
	int pidfd = child_pidfd(pid);
	CHECK(pidfd >= 0);
	CHECK(!child_exited(pidfd));
	close(p[1]); /* the child reads EOF and exits */
	for (int i = 0; i < 500 && !child_exited(pidfd); i++)
		usleep(10000);
	CHECK(child_exited(pidfd)); /* a zombie still: not reaped */
	CHECK_INT(waitpid(pid, NULL, 0), pid);
	CHECK(child_exited(pidfd));
	close(pidfd);
	CHECK(child_exited(-1));
	return unit_exit_code();
}

#include "config.h"

#include "process/cgroup_kill.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "process/child_process.h"
#include "util/log.h"
#include "util/small_file.h"

#define ROUND_PAUSE_MS 10
/* One round's reading of cgroup.procs: a reader's cgroup holds at most
 * reader_tasks_max processes; more just take further rounds. */
#define PIDS_PER_ROUND 1024

static void pause_ms(long long ms)
{
	struct timespec ts = { 0, ms * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

/* Whether the process (pinned by its pidfd) is still in the cgroup whose
 * path ends in tail (a line of /proc/PID/cgroup ends with it). */
static bool still_member(pid_t pid, const char *tail)
{
	char path[64], text[4096];
	size_t t = strlen(tail);

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (small_file_read(path, text, sizeof(text)) < 0)
		return false;
	for (char *line = text; *line;) {
		size_t len = strcspn(line, "\n");

		if (len >= t && !strncmp(line + len - t, tail, t))
			return true;
		line += len + (line[len] ? 1 : 0);
	}
	return false;
}

/* One round: SIGKILL to each process listed. Returns how many were
 * listed (0: empty), -1 when the list is unreadable. */
static int kill_listed(const char *dir, const char *tail, int *killed)
{
	char path[PATH_MAX];
	pid_t pids[PIDS_PER_ROUND];
	int n = 0;
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= sizeof(path))
		return -1;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	for (long v; n < PIDS_PER_ROUND && fscanf(f, "%ld", &v) == 1;)
		if (v > 0 && v <= INT_MAX)
			pids[n++] = (pid_t)v;
	fclose(f);
	for (int i = 0; i < n; i++) {
		int pidfd = child_pidfd(pids[i]);

		if (pidfd < 0)
			continue; /* gone meanwhile */
		/* The pidfd pins the process: if it is still a member, the
		 * pid was not reused between the list and the signal. */
		if (still_member(pids[i], tail)) {
			child_kill(pidfd);
			(*killed)++;
		}
		close(pidfd);
	}
	return n;
}

int cgroup_kill_all(const char *dir, long long deadline_ms)
{
	char kill_path[PATH_MAX];
	const char *base = strrchr(dir, '/');
	char tail[PATH_MAX];
	int killed = 0, listed;
	bool kill_file;

	if (!base || access(dir, F_OK) < 0)
		return 0;
	/* "/uid-N/reader-P": how /proc/PID/cgroup names the cgroup. */
	const char *from = base;
	while (from > dir && from[-1] != '/')
		from--;
	snprintf(tail, sizeof(tail), "%s", from > dir ? from - 1 : base);
	/* v2 (Linux 5.14+): the kernel kills them all at once, new forks too. */
	kill_file = (size_t)snprintf(kill_path, sizeof(kill_path), "%s/cgroup.kill", dir) <
			    sizeof(kill_path) &&
		    access(kill_path, F_OK) == 0;
	for (;;) {
		if (kill_file) {
			int fd = open(kill_path, O_WRONLY | O_CLOEXEC);

			if (fd >= 0) {
				if (write(fd, "1", 1) < 0)
					log_warning("%s: %s", kill_path, strerror(errno));
				close(fd);
			}
		}
		listed = kill_listed(dir, tail, &killed);
		if (listed <= 0 && rmdir(dir) == 0)
			return killed;
		if (listed <= 0 && errno == ENOENT)
			return killed;
		if (squash_now_ms() >= deadline_ms)
			break;
		pause_ms(ROUND_PAUSE_MS); /* killed ones leave the cgroup as they exit */
	}
	log_warning("cannot empty and remove the cgroup %s in time (%s)", dir,
		    listed < 0 ? "its process list is unreadable" : "processes are still in it");
	return -1;
}

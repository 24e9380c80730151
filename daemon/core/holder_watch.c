#include "config.h"
#include "core/holder_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/holders.h"
#include "core/sharing.h"
#include "process/child_process.h"
#include "process/process_watch.h"
#include "util/log.h"
#include "util/small_file.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

unsigned long long holder_start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (small_file_read(path, buf, sizeof(buf)) < 0)
		return 0;
	/* comm may hold spaces and parentheses: count from the last ')'. */
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (p && sscanf(p + 1, "%llu", &start) != 1)
		start = 0;
	return start;
}

int holder_peer_pidfd(int fd, pid_t pid)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0)
		return pidfd;
	/* Any other error: the peer is gone (6.5-6.15 say so), and its pid
	 * may be another user's process already. */
	if (errno != ENOPROTOOPT)
		return -1;
	return child_pidfd(pid); /* kernels before 6.5: the pid is all there is */
}

struct holder {
	struct daemon_state *ds;
	enum holder_kind kind;
	uint32_t job_id, step_id;
	pid_t pid;
	unsigned long long start;
};

static void holder_exited(void *arg, pid_t pid, int status)
{
	struct holder *w = arg;
	struct daemon_state *ds = w->ds;
	const struct squashd_config *cfg = settings_hold();
	struct teardown td = TEARDOWN_INIT(cfg);

	(void)status;
	pthread_mutex_lock(&ds->lock);
	struct job_entry *e = w->kind == HOLDER_SESSION
		? registry_find_session(&ds->registry, pid)
		: registry_find_step(&ds->registry, w->job_id, w->step_id);
	/* The entry this process made, not a later one under the same key. */
	if (e && !e->pending && e->session_pid == pid && e->session_start == w->start) {
		if (e->kind == HOLDER_SESSION)
			log_info("session of pid %d (uid %u) ended; releasing its %zu image(s)", (int)pid,
				 (unsigned)e->uid, e->count);
		else
			log_info("step %u.%u: its slurmstepd (pid %d) is gone without releasing; releasing",
				 e->job_id, e->step_id, (int)pid);
		holders_drop_locked(ds, e, &td);
		daemon_save_locked(ds);
		pthread_cond_broadcast(&ds->changed);
	}
	pthread_mutex_unlock(&ds->lock);
	free(w);
	sharing_teardown(ds, &td);
	settings_drop(cfg);
}

int holder_watch(struct daemon_state *ds, const struct job_entry *e, int pidfd)
{
	struct holder *w = malloc(sizeof(*w));

	if (w) {
		*w = (struct holder){ ds, e->kind, e->job_id, e->step_id, e->session_pid,
				      e->session_start };
		if (process_watch_add(pidfd, e->session_pid, e->uid, holder_exited, w) == 0)
			return 0;
	}
	free(w);
	close(pidfd);
	return -1;
}

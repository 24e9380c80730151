/* Asking slurmctld for a job's array ids (see job_array.h).
 *
 * The question runs in a forked child, as squashd's --query-slurm does:
 * reaching slurmctld can hang or end in fatal(), and neither may take the
 * prolog with it (a failed prolog drains the node). The child calls
 * slurm_load_job() of the Slurm library the prolog already runs in, found
 * with dlsym(), so that no second copy of libslurm is loaded into
 * slurmstepd. The pointer has the type of the header's own prototype and
 * is called through slurm_compat.h, which knows each release's form. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "job_array.h"
#include "slurm_compat.h"

#define QUERY_TIMEOUT_MS 30000

/* In the child: prints "ARRAY_JOB_ID ARRAY_TASK_ID" on fd and exits. */
static void query_child(int fd, uint32_t job_id)
{
	squash_load_job_fn *load = (squash_load_job_fn *)dlsym(RTLD_DEFAULT, "slurm_load_job");
	job_info_msg_t *msg = NULL;

	if (!load)
		_exit(3);
	if (squash_slurm_load_job(load, &msg, job_id) != 0 || !msg)
		_exit(4);
	for (uint32_t r = 0; r < msg->record_count; r++) {
		slurm_job_info_t *j = &msg->job_array[r];

		if (j->job_id == job_id) {
			dprintf(fd, "%u %u\n", j->array_job_id, j->array_task_id);
			_exit(0);
		}
	}
	_exit(5);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int squash_job_array_ids(uint32_t job_id, bool *is_array, uint32_t *array_job_id,
			 uint32_t *array_task_id, char *why, size_t whylen)
{
	static const char *const exits[] = {
		[3] = "the Slurm library is not available here",
		[4] = "slurmctld did not answer",
		[5] = "slurmctld does not know the job",
	};
	long long deadline = now_ms() + QUERY_TIMEOUT_MS;
	char buf[64];
	size_t got = 0;
	int pipefd[2], status = 0;
	unsigned a, t;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "cannot ask slurmctld for the job's array ids: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "cannot ask slurmctld for the job's array ids: %s", strerror(errno));
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	}
	if (pid == 0) {
		close(pipefd[0]);
		query_child(pipefd[1], job_id);
	}
	close(pipefd[1]);
	while (got < sizeof buf - 1) {
		struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
		long long left = deadline - now_ms();
		int r = poll(&p, 1, left > 0 ? (int)left : 0);
		ssize_t n;

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		n = read(pipefd[0], buf + got, sizeof buf - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(pipefd[0]);
	buf[got] = '\0';
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    sscanf(buf, "%u %u", &a, &t) != 2) {
		int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

		snprintf(why, whylen, "cannot ask slurmctld for the job's array ids: %s",
			 code >= 3 && code <= 5 ? exits[code]
			 : WIFSIGNALED(status) ? "no answer in time" : "the query failed");
		return -1;
	}
	*is_array = a != 0;
	*array_job_id = a;
	*array_task_id = t;
	return 0;
}

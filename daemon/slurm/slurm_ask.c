#include "config.h"
#include "slurm/slurm_ask.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "process/child_process.h"
#include "util/close_from.h"

/* The query's answer for a batch of 1024 questions fits this. */
#define QUERY_OUTPUT_MAX (1024 * 64)

int slurm_verdicts_parse(char *output, struct slurm_verdict *out, size_t max)
{
	int found = 0;

	for (char *save = NULL, *line = strtok_r(output, "\n", &save); line && (size_t)found < max;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned id, step = SLURM_NO_STEP;
		char state[64];
		/* "JOBID.STEPID VERDICT" for steps, "JOBID VERDICT" for jobs. */
		if (sscanf(line, "%u.%u %63[^\n]", &id, &step, state) == 3 ||
		    (step = SLURM_NO_STEP, sscanf(line, "%u %63[^\n]", &id, state) == 2)) {
			out[found].job_id = id;
			out[found].step_id = step;
			snprintf(out[found].state, sizeof(out[found].state), "%s", state);
			found++;
		}
	}
	return found;
}

int slurm_ask(const char *node, const char *slurm_conf, const uint32_t *ids,
	      const uint32_t *steps, size_t n, struct slurm_verdict *out, int timeout_ms,
	      char *err, size_t errlen)
{
	size_t output_max = n > 1024 ? n * 64 : QUERY_OUTPUT_MAX;
	char **argv = calloc(n + 4, sizeof(*argv));
	char *idtext = malloc(n * 24 + 1), *output = malloc(output_max + 1);
	int pipefd[2] = { -1, -1 }, pidfd = -1, found = -1, status = -1;
	size_t got = 0;
	pid_t pid;

	if (!argv || !idtext || !output || pipe2(pipefd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot start the Slurm query: %s", strerror(errno ? errno : ENOMEM));
		goto out;
	}
	argv[0] = (char *)"squashd";
	argv[1] = (char *)"--query-slurm";
	argv[2] = (char *)node;
	for (size_t i = 0, off = 0; i < n; i++) {
		argv[3 + i] = idtext + off;
		if (!steps || steps[i] == SLURM_NO_STEP)
			off += (size_t)sprintf(idtext + off, "%u", ids[i]) + 1;
		else
			off += (size_t)sprintf(idtext + off, "%u.%u", ids[i], steps[i]) + 1;
	}
	pid = child_fork(&pidfd);
	if (pid < 0) {
		snprintf(err, errlen, "cannot start the Slurm query: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		dup2(pipefd[1], STDOUT_FILENO);
		close_from(3); /* the query is slurmctld's to hold up, never squashd's descriptors */
		if (slurm_conf[0])
			setenv("SLURM_CONF", slurm_conf, 1);
		execv("/proc/self/exe", argv);
		dprintf(STDERR_FILENO, "squashd: error: cannot run the Slurm query: %s\n", strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	long long deadline = squash_now_ms() + timeout_ms;
	for (;;) {
		int r = child_wait_readable(pipefd[0], deadline);
		if (r != 1) {
			snprintf(err, errlen, r == 0 ? "slurmctld did not answer within %d s" : "stopped",
				 timeout_ms / 1000);
			child_abandon(pidfd);
			pidfd = -1;
			goto out;
		}
		ssize_t k = read(pipefd[0], output + got, output_max - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
		if (got == output_max)
			break;
	}
	output[got] = '\0';
	if (child_wait(pidfd, deadline, &status) != 1 || status != 0) {
		snprintf(err, errlen, "the Slurm query failed (exit status %d; its reason is in this log)",
			 status >= 0 ? (status >> 8) & 0xff : -1);
		child_abandon(pidfd);
		pidfd = -1;
		goto out;
	}
	found = slurm_verdicts_parse(output, out, n);
out:
	if (pidfd >= 0)
		close(pidfd);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	free(argv);
	free(idtext);
	free(output);
	return found;
}

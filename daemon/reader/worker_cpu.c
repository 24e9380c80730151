/* Where a worker of squash-reader --serve runs (worker_cpu.h). */
#include "config.h"

#include "reader/worker_cpu.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

void worker_home_init(struct worker_home *h)
{
	h->known = sched_getaffinity(0, sizeof(h->cpus), &h->cpus) == 0;
}

void worker_home_attr(const struct worker_home *h, pthread_attr_t *attr)
{
	if (h->known)
		pthread_attr_setaffinity_np(attr, sizeof(h->cpus), &h->cpus);
}

/* Field 39 of /proc/TID/stat, the CPU the thread last ran on; -1 when it
 * cannot be read (gone, or another user's under hidepid). The command name
 * (field 2) may hold spaces and parentheses: the count starts after the
 * last ')'. */
static int last_cpu(uint32_t tid)
{
	char path[32], buf[1024];
	ssize_t n;
	int fd, field = 2;

	snprintf(path, sizeof(path), "/proc/%u/stat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	for (char *c = strrchr(buf, ')'); c && *c; c++) {
		if (*c != ' ')
			continue;
		if (++field == 39) {
			int cpu = 0;

			for (c++; *c >= '0' && *c <= '9' && cpu < CPU_SETSIZE; c++)
				cpu = cpu * 10 + (*c - '0');
			return cpu < CPU_SETSIZE ? cpu : -1;
		}
	}
	return -1;
}

int requester_cpu(uint32_t pid, bool bound_only)
{
	cpu_set_t s;

	if (pid == 0 || sched_getaffinity((pid_t)pid, sizeof(s), &s) != 0)
		return -1;
	if (CPU_COUNT(&s) != 1)
		return bound_only ? -1 : last_cpu(pid);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s))
			return c;
	return -1;
}

bool worker_follow(int cpu, int *pinned)
{
	cpu_set_t s;

	if (*pinned == cpu)
		return true;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s) != 0)
		return false;
	*pinned = cpu;
	return true;
}

void worker_go_home(const struct worker_home *h, int *pinned)
{
	if (*pinned < 0)
		return;
	if (h->known)
		sched_setaffinity(0, sizeof(h->cpus), &h->cpus);
	*pinned = -1;
}

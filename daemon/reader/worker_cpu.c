/* Where a worker of squash-reader --serve runs (worker_cpu.h). */
#include "config.h"

#include "reader/worker_cpu.h"

#include <sys/types.h>

void worker_home_init(struct worker_home *h)
{
	h->known = sched_getaffinity(0, sizeof(h->cpus), &h->cpus) == 0;
}

void worker_home_attr(const struct worker_home *h, pthread_attr_t *attr)
{
	if (h->known)
		pthread_attr_setaffinity_np(attr, sizeof(h->cpus), &h->cpus);
}

int requester_bound_cpu(uint32_t pid)
{
	cpu_set_t s;

	if (sched_getaffinity((pid_t)pid, sizeof(s), &s) != 0 || CPU_COUNT(&s) != 1)
		return -1;
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

/* A fair share of a long list of pids (pid_rotation.h). */
#include "config.h"
#include "core/pid_rotation.h"

#include <stdlib.h>

static int by_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return x < y ? -1 : x > y;
}

size_t pid_rotation_pick(pid_t *all, size_t *n, size_t *cursor, pid_t *out, size_t max)
{
	size_t u = 0, take;

	if (*n == 0)
		return 0;
	qsort(all, *n, sizeof(*all), by_pid);
	for (size_t i = 0; i < *n; i++)
		if (u == 0 || all[u - 1] != all[i])
			all[u++] = all[i];
	*n = u;
	take = u < max ? u : max;
	*cursor %= u;
	for (size_t i = 0; i < take; i++)
		out[i] = all[(*cursor + i) % u];
	*cursor += take;
	return take;
}

bool pid_rotation_has(const pid_t *all, size_t n, pid_t pid)
{
	return n > 0 && bsearch(&pid, all, n, sizeof(*all), by_pid) != NULL;
}

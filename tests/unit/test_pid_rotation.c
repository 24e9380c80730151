/* core/pid_rotation.c: a watch that looks at max pids per round takes
 * the next ones each round, so no pid is left out for good because many
 * others come first in the registry (a user's thousand squashfuse_ll
 * servers ahead of another user's one, core/stopped_readers.c); repeats
 * count once; the sorted list answers membership. */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/pid_rotation.h"
#include "unit.h"

#define MAX 1024

int main(void)
{
	/* 3,000 servers of one user listed first (each twice: two mounts),
	 * then another user's one server, last. */
	size_t n_list = 6001;
	pid_t *list = malloc(n_list * sizeof(*list)), out[MAX];
	bool looked[6001] = { false };
	size_t cursor = 0;

	CHECK(list != NULL);
	for (size_t i = 0; i < 6000; i++)
		list[i] = (pid_t)(1000 + i / 2);
	list[6000] = 999999; /* the other user's */
	for (int round = 0; round < 3; round++) {
		pid_t *all = malloc(n_list * sizeof(*all));
		size_t n = n_list, got;

		CHECK(all != NULL);
		memcpy(all, list, n_list * sizeof(*all));
		got = pid_rotation_pick(all, &n, &cursor, out, MAX);
		CHECK_INT((int)n, 3001);
		CHECK_INT((int)got, MAX);
		for (size_t i = 0; i < got; i++) {
			size_t k = out[i] == 999999 ? 3000 : (size_t)(out[i] - 1000);

			CHECK(k <= 3000);
			looked[k] = true;
		}
		CHECK(pid_rotation_has(all, n, 999999));
		CHECK(pid_rotation_has(all, n, 1000));
		CHECK(!pid_rotation_has(all, n, 999));
		free(all);
	}
	/* Three rounds of 1,024 looked at all 3,001, the last one too. */
	for (size_t k = 0; k <= 3000; k++)
		CHECK(looked[k]);

	/* Fewer than max: all of them, every round. */
	pid_t few[] = { 7, 5, 7, 3 }, got[MAX];
	size_t n = 4;

	cursor = 5;
	CHECK_INT((int)pid_rotation_pick(few, &n, &cursor, got, MAX), 3);
	CHECK_INT((int)n, 3);
	CHECK(got[0] != got[1] && got[1] != got[2] && got[0] != got[2]);

	/* None. */
	n = 0;
	CHECK_INT((int)pid_rotation_pick(NULL, &n, &cursor, got, MAX), 0);
	CHECK(!pid_rotation_has(NULL, 0, 1));
	free(list);
	return unit_exit_code();
}

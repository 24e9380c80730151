/* The counts of loop devices still attached after their unmount
 * (daemon/core/pinned_table.c): a device counts for the node and for the
 * users whose sessions held it; once the table is full, a new device
 * takes the name of the oldest device of the user charged with the most,
 * whose counts stay, so a full table lowers nobody's count and does not
 * drop another user's device. No root needed. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "core/pinned_table.h"
#include "unit.h"

static struct pinned_table table;
static long long clock_ms;

static struct pinned device(unsigned n, unsigned n_uids, uid_t a, uid_t b)
{
	struct pinned p = { .n_uids = n_uids, .uids = { a, b }, .since_ms = ++clock_ms };

	snprintf(p.device, sizeof(p.device), "/dev/loop%u", n);
	return p;
}

static bool named(const char *dev)
{
	for (unsigned i = 0; i < table.n; i++)
		if (!strcmp(table.e[i].device, dev))
			return true;
	return false;
}

static void a_device_counts_for_the_node_and_its_users_once(void)
{
	struct pinned p = device(1, 2, 1000, 1001);

	memset(&table, 0, sizeof(table));
	CHECK(pinned_table_add(&table, &p) == NULL);
	CHECK(pinned_table_add(&table, &p) == NULL); /* the same device again: once */
	struct pinned q = device(2, 0, 0, 0);        /* an open file held it: the node's only */
	CHECK(pinned_table_add(&table, &q) == NULL);
	CHECK_INT(pinned_table_count(&table), 2);
	CHECK_INT(pinned_table_of_user(&table, 1000), 1);
	CHECK_INT(pinned_table_of_user(&table, 1001), 1);
	CHECK_INT(pinned_table_of_user(&table, 1002), 0);
	pinned_table_remove(&table, 0); /* detached */
	CHECK_INT(pinned_table_count(&table), 1);
	CHECK_INT(pinned_table_of_user(&table, 1000), 0);
}

static void a_full_table_takes_the_name_of_the_heaviest_users_oldest_and_keeps_every_count(void)
{
	uid_t uids[16];
	unsigned counts[16];

	memset(&table, 0, sizeof(table));
	/* The oldest device is uid 2000's only one; uid 1000 has the rest. */
	struct pinned first = device(0, 1, 2000, 0);
	pinned_table_add(&table, &first);
	for (unsigned i = 1; i < PINNED_LOOPS_MAX; i++) {
		struct pinned p = device(i, 1, 1000, 0);
		CHECK(pinned_table_add(&table, &p) == NULL);
	}
	/* Another of uid 1000's: its own oldest is forgotten by name, not
	 * uid 2000's older one; no count goes down. */
	struct pinned more = device(PINNED_LOOPS_MAX, 1, 1000, 0);
	const char *dropped = pinned_table_add(&table, &more);
	CHECK_STR(dropped, "/dev/loop1");
	CHECK(named("/dev/loop0"));
	CHECK_INT(pinned_table_count(&table), PINNED_LOOPS_MAX + 1);
	CHECK_INT(pinned_table_of_user(&table, 1000), PINNED_LOOPS_MAX);
	CHECK_INT(pinned_table_of_user(&table, 2000), 1);
	/* A third user's device: uid 1000 is still the heaviest and pays. */
	struct pinned third = device(PINNED_LOOPS_MAX + 1, 1, 3000, 0);
	CHECK_STR(pinned_table_add(&table, &third), "/dev/loop2");
	CHECK_INT(pinned_table_of_user(&table, 1000), PINNED_LOOPS_MAX);
	CHECK_INT(pinned_table_of_user(&table, 3000), 1);
	CHECK_INT(pinned_table_count(&table), PINNED_LOOPS_MAX + 2);
	/* The forgotten ones stay charged when the named ones detach. */
	while (table.n)
		pinned_table_remove(&table, 0);
	CHECK_INT(pinned_table_of_user(&table, 1000), 2);
	CHECK_INT(pinned_table_of_user(&table, 2000), 0);
	CHECK_INT(pinned_table_count(&table), 2);
	CHECK_INT(pinned_table_users(&table, uids, counts, 16), 1);
	CHECK_INT(uids[0], 1000);
	CHECK_INT(counts[0], 2);
}

static void a_full_table_of_devices_held_by_no_session_forgets_the_oldest_for_the_node(void)
{
	memset(&table, 0, sizeof(table));
	for (unsigned i = 0; i < PINNED_LOOPS_MAX; i++) {
		struct pinned p = device(i, 0, 0, 0);
		pinned_table_add(&table, &p);
	}
	struct pinned shared = device(PINNED_LOOPS_MAX, 2, 1000, 1001);
	CHECK_STR(pinned_table_add(&table, &shared), "/dev/loop0");
	CHECK_INT(pinned_table_count(&table), PINNED_LOOPS_MAX + 1);
	CHECK_INT(table.n_forgotten, 0);
	/* Next: a device of both users is the only one charged to anyone;
	 * forgetting it keeps both users' counts. */
	struct pinned next = device(PINNED_LOOPS_MAX + 1, 0, 0, 0);
	CHECK_STR(pinned_table_add(&table, &next), "/dev/loop1024");
	CHECK_INT(pinned_table_of_user(&table, 1000), 1);
	CHECK_INT(pinned_table_of_user(&table, 1001), 1);
	CHECK_INT(pinned_table_count(&table), PINNED_LOOPS_MAX + 2);
}

int main(void)
{
	a_device_counts_for_the_node_and_its_users_once();
	a_full_table_takes_the_name_of_the_heaviest_users_oldest_and_keeps_every_count();
	a_full_table_of_devices_held_by_no_session_forgets_the_oldest_for_the_node();
	return unit_exit_code();
}

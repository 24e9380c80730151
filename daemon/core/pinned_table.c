/* Counts of loop devices still attached after their unmount
 * (pinned_table.h). */
#include "config.h"
#include "core/pinned_table.h"

#include <stdlib.h>
#include <string.h>

static int by_uid(const void *a, const void *b)
{
	uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;

	return x < y ? -1 : x > y;
}

/* The user charged with the most devices, by name or forgotten; false
 * when no device is charged to anyone. */
static bool heaviest_user(const struct pinned_table *t, uid_t *out)
{
	/* Static (32 KiB): callers hold the table's lock. */
	static uid_t all[PINNED_LOOPS_MAX * MOUNT_SESSION_UIDS];
	unsigned n = 0, best = 0;

	for (unsigned i = 0; i < t->n; i++)
		for (unsigned k = 0; k < t->e[i].n_uids; k++)
			all[n++] = t->e[i].uids[k];
	if (n == 0)
		return false;
	qsort(all, n, sizeof(*all), by_uid);
	for (unsigned i = 0, run; i < n; i += run) {
		for (run = 1; i + run < n && all[i + run] == all[i]; run++)
			;
		unsigned total = run;

		for (unsigned f = 0; f < t->n_forgotten; f++)
			if (t->forgotten[f].uid == all[i])
				total += t->forgotten[f].n;
		if (total > best) {
			best = total;
			*out = all[i];
		}
	}
	return true;
}

static bool charged_to(const struct pinned *p, uid_t uid)
{
	for (unsigned k = 0; k < p->n_uids; k++)
		if (p->uids[k] == uid)
			return true;
	return false;
}

static void charge_forgotten(struct pinned_table *t, uid_t uid)
{
	unsigned f = 0;

	while (f < t->n_forgotten && t->forgotten[f].uid != uid)
		f++;
	if (f == t->n_forgotten) {
		if (f == PINNED_FORGOTTEN_USERS_MAX)
			return; /* counted for the node only */
		t->forgotten[t->n_forgotten++] = (struct pinned_forgotten){ uid, 0 };
	}
	t->forgotten[f].n++;
}

const char *pinned_table_add(struct pinned_table *t, const struct pinned *p)
{
	static char dropped[sizeof(p->device)];
	const char *ret = NULL;

	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->e[i].device, p->device))
			pinned_table_remove(t, i--);
	if (t->n == PINNED_LOOPS_MAX) {
		uid_t heavy = 0;
		bool someone = heaviest_user(t, &heavy);
		unsigned first = t->n;

		for (unsigned i = 0; i < t->n; i++)
			if ((!someone || charged_to(&t->e[i], heavy)) &&
			    (first == t->n || t->e[i].since_ms < t->e[first].since_ms))
				first = i;
		if (someone)
			charge_forgotten(t, heavy); /* first: it has a place if anyone does */
		for (unsigned k = 0; k < t->e[first].n_uids; k++)
			if (t->e[first].uids[k] != heavy)
				charge_forgotten(t, t->e[first].uids[k]);
		t->forgotten_node++;
		memcpy(dropped, t->e[first].device, sizeof(dropped));
		ret = dropped;
		pinned_table_remove(t, first);
	}
	t->e[t->n++] = *p;
	return ret;
}

void pinned_table_remove(struct pinned_table *t, unsigned i)
{
	t->e[i] = t->e[--t->n];
}

unsigned pinned_table_count(const struct pinned_table *t)
{
	return t->n + t->forgotten_node;
}

unsigned pinned_table_of_user(const struct pinned_table *t, uid_t uid)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->n; i++)
		n += charged_to(&t->e[i], uid);
	for (unsigned f = 0; f < t->n_forgotten; f++)
		if (t->forgotten[f].uid == uid)
			n += t->forgotten[f].n;
	return n;
}

static void count_for(uid_t *uids, unsigned *counts, unsigned *n, unsigned max, uid_t uid, unsigned c)
{
	unsigned j = 0;

	while (j < *n && uids[j] != uid)
		j++;
	if (j == *n) {
		if (*n == max)
			return;
		uids[j] = uid;
		counts[(*n)++] = 0;
	}
	counts[j] += c;
}

unsigned pinned_table_users(const struct pinned_table *t, uid_t *uids, unsigned *counts, unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->n; i++)
		for (unsigned k = 0; k < t->e[i].n_uids; k++)
			count_for(uids, counts, &n, max, t->e[i].uids[k], 1);
	for (unsigned f = 0; f < t->n_forgotten; f++)
		count_for(uids, counts, &n, max, t->forgotten[f].uid, t->forgotten[f].n);
	return n;
}

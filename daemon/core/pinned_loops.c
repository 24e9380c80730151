/* Loop devices still attached after their kernel mount's unmount
 * (pinned_loops.h). */
#include "config.h"
#include "core/pinned_loops.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "util/log.h"
#include "util/small_file.h"

/* A leaf lock: taken under ds->lock, never the other way round. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pinned_table table;
static long long looked_ms; /* when the devices were last looked at */

/* What /dev/loopN is attached to (sysfs: no open of the device, which
 * would hold it), or false when it is not. */
static bool attached_to(const char *device, char *backing, size_t len)
{
	const char *name = strrchr(device, '/');
	char path[96];

	snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name ? name + 1 : device);
	if (small_file_read(path, backing, len) < 0)
		return false;
	backing[strcspn(backing, "\n")] = '\0';
	return true;
}

void pinned_loops_note(const struct mount_entry *m)
{
	struct pinned p = { .since_ms = squash_now_ms() };

	if (m->key.mode != SQUASH__MOUNT_MODE__KERNEL || !m->loop_device[0] ||
	    !attached_to(m->loop_device, p.backing, sizeof(p.backing)))
		return;
	snprintf(p.device, sizeof(p.device), "%s", m->loop_device);
	snprintf(p.image, sizeof(p.image), "%s", m->image ? m->image : "");
	p.n_uids = m->n_session_uids;
	memcpy(p.uids, m->session_uids, sizeof(p.uids));
	pthread_mutex_lock(&lock);
	const char *dropped = pinned_table_add(&table, &p);

	if (dropped)
		log_warning("%d loop devices are still attached after their unmount: forgetting the name of %s, "
			    "the oldest of the user charged with the most, which counts against max_loop_devices "
			    "and that user's share until squashd restarts", PINNED_LOOPS_MAX, dropped);
	pthread_mutex_unlock(&lock);
}

/* Under both locks: forgets the devices detached since, or attached by
 * squashd again for a mount it holds; each at most once a second, but
 * every time in the first PINNED_LOOPS_YOUNG_MS after its unmount (the
 * kernel may detach it a moment late: never counted for long then). */
#define PINNED_LOOPS_YOUNG_MS 2000
static void look_again(struct daemon_state *ds)
{
	long long now = squash_now_ms();
	bool all = !looked_ms || now - looked_ms >= 1000 || now < looked_ms;

	if (table.n == 0)
		return;
	if (all)
		looked_ms = now;
	for (unsigned i = 0; i < table.n; i++) {
		const struct pinned *p = &table.e[i];
		char backing[256];
		bool ours = false;

		if (!all && now - p->since_ms >= PINNED_LOOPS_YOUNG_MS)
			continue;

		for (const struct mount_entry *m = ds->registry.mounts; m && !ours; m = m->next)
			ours = m->key.mode == SQUASH__MOUNT_MODE__KERNEL && !strcmp(m->loop_device, p->device);
		if (ours || !attached_to(p->device, backing, sizeof(backing)) || strcmp(backing, p->backing) != 0) {
			log_info("loop device %s of image %s is detached now", p->device, p->image);
			pinned_table_remove(&table, i--);
		}
	}
}

unsigned pinned_loops_count_locked(struct daemon_state *ds)
{
	pthread_mutex_lock(&lock);
	look_again(ds);
	unsigned n = pinned_table_count(&table);
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned pinned_loops_of_user_locked(struct daemon_state *ds, uid_t uid)
{
	pthread_mutex_lock(&lock);
	look_again(ds);
	unsigned n = pinned_table_of_user(&table, uid);
	pthread_mutex_unlock(&lock);
	return n;
}

/* The note on devices forgotten by name (lock held). */
static const char *forgotten_note(char *line, size_t len)
{
	size_t u = 0;
	int w = snprintf(line, len, "%u loop device(s) still attached after their unmount are no longer named "
			 "(squashd names %d at most); they count against max_loop_devices until squashd restarts",
			 table.forgotten_node, PINNED_LOOPS_MAX);

	u = w > 0 && (size_t)w < len ? (size_t)w : len - 1;
	for (unsigned f = 0; f < table.n_forgotten && u + 40 < len; f++) {
		w = snprintf(line + u, len - u, "%s%u of uid %u", f ? ", " : "; and the loop devices of users: ",
			     table.forgotten[f].n, (unsigned)table.forgotten[f].uid);
		u += w > 0 ? (size_t)w : 0;
	}
	return line;
}

void pinned_loops_notes_locked(struct daemon_state *ds, void (*say)(void *arg, const char *line), void *arg)
{
	long long now = squash_now_ms();
	char line[1536], uids[MOUNT_SESSION_UIDS * 12 + 1];

	pthread_mutex_lock(&lock);
	look_again(ds);
	if (table.forgotten_node)
		say(arg, forgotten_note(line, sizeof(line)));
	for (unsigned i = 0; i < table.n; i++) {
		const struct pinned *p = &table.e[i];
		size_t u = 0;

		if (now - p->since_ms < PINNED_LOOPS_NOTE_MS)
			continue;
		uids[0] = '\0';
		for (unsigned k = 0; k < p->n_uids && u < sizeof(uids); k++) {
			int w = snprintf(uids + u, sizeof(uids) - u, "%s%u", k ? ", " : "", (unsigned)p->uids[k]);

			u += w > 0 ? (size_t)w : sizeof(uids);
		}
		snprintf(line, sizeof(line), "loop device %.31s of image %.255s is still attached %lld s after squashd "
			 "unmounted it: something outside squashd holds its squashfs (a mount namespace with a "
			 "copy of it, or an open file); it counts against max_loop_devices%s%s%s until the "
			 "kernel detaches it", p->device, p->image, (now - p->since_ms) / 1000,
			 p->n_uids ? " and the loop devices of uid " : "", uids,
			 p->n_uids ? " (whose squash-shell sessions held it)" : "");
		say(arg, line);
	}
	pthread_mutex_unlock(&lock);
}

void pinned_loops_budget_rows(struct daemon_state *ds, const struct squashd_config *cfg,
			      user_budget_emit emit, void *arg)
{
	const unsigned max = PINNED_LOOPS_MAX * MOUNT_SESSION_UIDS + PINNED_FORGOTTEN_USERS_MAX;
	uid_t *uids = malloc(max * sizeof(*uids));
	unsigned *counts = malloc(max * sizeof(*counts)), n;

	(void)cfg;
	if (!uids || !counts) {
		free(uids);
		free(counts);
		return;
	}
	pthread_mutex_lock(&ds->lock);
	pthread_mutex_lock(&lock);
	look_again(ds);
	n = pinned_table_users(&table, uids, counts, max);
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&ds->lock);
	for (unsigned j = 0; j < n; j++)
		emit(arg, uids[j], "kernel mounts kept after unmount", counts[j], 0);
	free(uids);
	free(counts);
}

/* Loop devices still attached after their kernel mount's unmount
 * (pinned_loops.h). */
#include "config.h"
#include "core/pinned_loops.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "util/log.h"
#include "util/small_file.h"

struct pinned {
	char device[32];        /* /dev/loopN */
	char backing[256];      /* what sysfs said it was attached to, cut */
	char image[256];        /* the image, for the note, cut */
	uid_t uids[MOUNT_SESSION_UIDS];
	unsigned n_uids;
	long long since_ms;     /* its unmount */
};

/* A leaf lock: taken under ds->lock, never the other way round. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pinned pinned[PINNED_LOOPS_MAX];
static unsigned n_pinned;
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

static void forget(unsigned i)
{
	pinned[i] = pinned[--n_pinned];
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
	for (unsigned i = 0; i < n_pinned; i++)
		if (!strcmp(pinned[i].device, p.device))
			forget(i--);
	if (n_pinned == PINNED_LOOPS_MAX) {
		unsigned first = 0;

		for (unsigned i = 1; i < n_pinned; i++)
			if (pinned[i].since_ms < pinned[first].since_ms)
				first = i;
		log_warning("forgetting loop device %s, still attached after its unmount: %d such devices "
			    "are remembered at most", pinned[first].device, PINNED_LOOPS_MAX);
		forget(first);
	}
	pinned[n_pinned++] = p;
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

	if (n_pinned == 0)
		return;
	if (all)
		looked_ms = now;
	for (unsigned i = 0; i < n_pinned; i++) {
		char backing[256];
		bool ours = false;

		if (!all && now - pinned[i].since_ms >= PINNED_LOOPS_YOUNG_MS)
			continue;

		for (const struct mount_entry *m = ds->registry.mounts; m && !ours; m = m->next)
			ours = m->key.mode == SQUASH__MOUNT_MODE__KERNEL && !strcmp(m->loop_device, pinned[i].device);
		if (ours || !attached_to(pinned[i].device, backing, sizeof(backing)) ||
		    strcmp(backing, pinned[i].backing) != 0) {
			log_info("loop device %s of image %s is detached now", pinned[i].device, pinned[i].image);
			forget(i--);
		}
	}
}

unsigned pinned_loops_count_locked(struct daemon_state *ds)
{
	pthread_mutex_lock(&lock);
	look_again(ds);
	unsigned n = n_pinned;
	pthread_mutex_unlock(&lock);
	return n;
}

unsigned pinned_loops_of_user_locked(struct daemon_state *ds, uid_t uid)
{
	unsigned n = 0;

	pthread_mutex_lock(&lock);
	look_again(ds);
	for (unsigned i = 0; i < n_pinned; i++)
		for (unsigned k = 0; k < pinned[i].n_uids; k++)
			n += pinned[i].uids[k] == uid;
	pthread_mutex_unlock(&lock);
	return n;
}

void pinned_loops_notes_locked(struct daemon_state *ds, void (*say)(void *arg, const char *line), void *arg)
{
	long long now = squash_now_ms();
	char line[1536], uids[MOUNT_SESSION_UIDS * 12 + 1];

	pthread_mutex_lock(&lock);
	look_again(ds);
	for (unsigned i = 0; i < n_pinned; i++) {
		const struct pinned *p = &pinned[i];
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
	uid_t uids[PINNED_LOOPS_MAX * MOUNT_SESSION_UIDS];
	unsigned counts[PINNED_LOOPS_MAX * MOUNT_SESSION_UIDS], n = 0;

	(void)cfg;
	pthread_mutex_lock(&ds->lock);
	pthread_mutex_lock(&lock);
	look_again(ds);
	for (unsigned i = 0; i < n_pinned; i++)
		for (unsigned k = 0; k < pinned[i].n_uids; k++) {
			unsigned j = 0;

			while (j < n && uids[j] != pinned[i].uids[k])
				j++;
			if (j == n) {
				uids[n] = pinned[i].uids[k];
				counts[n++] = 0;
			}
			counts[j]++;
		}
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&ds->lock);
	for (unsigned j = 0; j < n; j++)
		emit(arg, uids[j], "kernel mounts kept after unmount", counts[j], 0);
}

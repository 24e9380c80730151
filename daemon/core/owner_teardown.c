#include "config.h"
#include "core/owner_teardown.h"

#include <stdlib.h>

#include "core/sharing.h"
#include "process/user_executor.h"
#include "registry/registry.h"
#include "util/log.h"

/* Kernel mounts and merges are nobody's: their teardowns log on no
 * user's budget, unless a user's own request let them go (log_peer). */
_Static_assert(MOUNT_OWNER_ANY == USER_EXECUTOR_NOBODY, "nobody's mounts are the executor's nobody");

struct owned {
	struct daemon_state *ds;
	struct teardown td;
};

static void tear_down(void *arg)
{
	struct owned *o = arg;

	/* A user's failed session lets go of kernel mounts too, on nobody's
	 * thread: their lines are still that user's, who may loop it. */
	if (o->td.log_peer)
		log_context_peer(o->td.log_peer);
	/* A merged mount's lowers may be other owners' (it is everyone's). */
	o->td.lowers_to = owners_teardown;
	sharing_teardown(o->ds, &o->td);
	settings_drop(o->td.cfg);
	free(o);
}

void owner_teardown(struct daemon_state *ds, struct teardown *td, uid_t owner)
{
	struct owned *o;

	if (!td->head && !td->dirs)
		return;
	o = malloc(sizeof(*o));
	if (o) {
		*o = (struct owned){ ds, *td };
		o->td.cfg = settings_hold();
		if (user_executor_run(owner, tear_down, o) == 0) {
			td->head = NULL;
			td->dirs = NULL;
			return;
		}
		settings_drop(o->td.cfg);
		free(o);
	}
	sharing_teardown(ds, td);
}

void owners_teardown(struct daemon_state *ds, struct teardown *td)
{
	if (td->dirs) {
		struct teardown dirs = TEARDOWN_INIT(td->cfg);

		dirs.log_peer = td->log_peer;
		dirs.dirs = td->dirs;
		td->dirs = NULL;
		sharing_teardown(ds, &dirs);
	}
	while (td->head) {
		struct teardown mine = TEARDOWN_INIT(td->cfg);
		struct mount_entry **tail = &mine.head;
		uid_t owner = td->head->key.owner_uid;

		mine.log_peer = td->log_peer;

		/* Moves the owner's mounts from td to mine, in order. */
		for (struct mount_entry **pm = &td->head; *pm;) {
			struct mount_entry *m = *pm;

			if (m->key.owner_uid != owner) {
				pm = &m->teardown_next;
				continue;
			}
			*pm = m->teardown_next;
			m->teardown_next = NULL;
			*tail = m;
			tail = &m->teardown_next;
		}
		owner_teardown(ds, &mine, owner);
	}
}

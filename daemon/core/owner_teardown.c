#include "config.h"
#include "core/owner_teardown.h"

#include <stdlib.h>

#include "core/sharing.h"
#include "process/user_executor.h"

struct owned {
	struct daemon_state *ds;
	struct teardown td;
};

static void tear_down(void *arg)
{
	struct owned *o = arg;

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

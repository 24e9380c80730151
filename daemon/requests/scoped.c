#include "config.h"
#include "requests/scoped.h"

#include <stdio.h>

#include "core/holders.h"
#include "util/log.h"

void scoped_finish_locked(struct request *rq, struct job_entry *e, enum result res, char *err,
			  size_t errlen, const char *who)
{
	struct daemon_state *ds = rq->ds;
	struct reply *out = rq->out;

	/* "Mounted" is answered once the registry that records it is on
	 * disk: saved as made (settling), still pending (nobody drops it)
	 * while the saver writes it (core/daemon.h). */
	if (res == RESULT_OK) {
		e->settling = true;
		if (daemon_save_grouped_locked(ds) < 0) {
			snprintf(err, errlen, "squashd on this node cannot save its registry (%s); "
				 "the mounts were undone", ds->save_error);
			res = RESULT_NODE_ERROR;
		}
		e->settling = false;
	}
	holders_settle_locked(ds, e);
	if (res == RESULT_OK && reply_add_mounts(out, e) == 0) {
		log_info("%s: %zu image(s) ready for uid %u", who, e->count, (unsigned)e->uid);
	} else {
		if (res == RESULT_OK)
			snprintf(err, errlen, "%s", out->message);
		else if (res == RESULT_NODE_ERROR)
			log_error("%s (uid %u): %s", who, (unsigned)e->uid, err);
		else /* a user's own session's mistakes: within its log budget */
			log_peer_info(rq->peer->user, "%s (uid %u) refused: %s", who, (unsigned)e->uid, err);
		reply_free(out);
		reply_error(out, res == RESULT_OK ? SQUASH__STATUS__NODE_ERROR : reply_status_of(res), "%s", err);
		holders_drop_locked(ds, e, rq->td);
		daemon_save_locked(ds);
	}
}

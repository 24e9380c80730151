/* gc (root: squashctl gc): one reconciliation with Slurm now
 * (core/gc.h); the answer lists the jobs it released. */
#include "config.h"

#include <stdlib.h>

#include "core/gc.h"
#include "requests/requests.h"
#include "util/log.h"

void request_gc(struct request *rq)
{
	char err[512];
	uint32_t *released = calloc(GC_BATCH, sizeof(*released));

	if (!released) {
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR, "out of memory");
		return;
	}
	int n = gc_pass(rq->ds, rq->cfg, released, GC_BATCH, err, sizeof(err));
	if (n < 0) {
		free(released);
		log_warning("gc: %s", err);
		reply_error(rq->out, SQUASH__STATUS__NODE_ERROR, "cannot reconcile with Slurm: %s", err);
		return;
	}
	rq->out->resp.released_job_ids = released;
	rq->out->resp.n_released_job_ids = (size_t)n < GC_BATCH ? (size_t)n : GC_BATCH;
}

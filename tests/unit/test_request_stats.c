/* squashd's answer-time histogram (daemon/core/request_stats.c): which bucket a
 * time lands in (upper bounds inclusive, like Prometheus' le), +Inf beyond
 * the last bound, the sum, failures, and kinds kept apart. */
#include "config.h"

#include "core/request_stats.h"
#include "unit.h"

static const Squash__RequestKindStats *kind(const Squash__NodeStatus *st, const char *name)
{
	for (size_t i = 0; i < st->n_request_kinds; i++)
		if (!strcmp(st->request_kinds[i]->kind, name))
			return st->request_kinds[i];
	return NULL;
}

int main(void)
{
	static struct request_stats_view view;
	Squash__NodeStatus st = SQUASH__NODE_STATUS__INIT;

	request_stats_record(SQUASH__REQUEST__OP_MOUNT_JOB, true, 999);      /* 1 ms bucket */
	request_stats_record(SQUASH__REQUEST__OP_MOUNT_JOB, true, 1000);     /* 1 ms: le is inclusive */
	request_stats_record(SQUASH__REQUEST__OP_MOUNT_JOB, false, 1001);    /* 5 ms */
	request_stats_record(SQUASH__REQUEST__OP_MOUNT_JOB, true, 31000000); /* beyond 30 s: +Inf */
	request_stats_record(SQUASH__REQUEST__OP_RELEASE_JOB, true, -5);     /* clock oddity: 0 */
	request_stats_record(SQUASH__REQUEST__OP__NOT_SET, false, 0);

	request_stats_fill(&view, &st);
	CHECK_INT(st.n_latency_bounds_s, REQUEST_STATS_BOUNDS);
	CHECK(st.latency_bounds_s[0] == 0.001);
	CHECK(st.latency_bounds_s[1] == 0.005);
	CHECK(st.latency_bounds_s[REQUEST_STATS_BOUNDS - 1] == 30.0);
	CHECK_INT(st.n_request_kinds, REQUEST_STATS_KINDS);

	const Squash__RequestKindStats *m = kind(&st, "mount");
	CHECK(m != NULL);
	if (m) {
		CHECK_INT(m->requests, 4);
		CHECK_INT(m->failures, 1);
		CHECK_INT(m->n_bucket_counts, REQUEST_STATS_BOUNDS + 1);
		CHECK_INT(m->bucket_counts[0], 2);
		CHECK_INT(m->bucket_counts[1], 1);
		CHECK_INT(m->bucket_counts[REQUEST_STATS_BOUNDS], 1);
		uint64_t total = 0;
		for (size_t b = 0; b < m->n_bucket_counts; b++)
			total += m->bucket_counts[b];
		CHECK_INT(total, m->requests);
		CHECK(m->answer_seconds_sum > 31.0029 && m->answer_seconds_sum < 31.0031);
	}
	const Squash__RequestKindStats *r = kind(&st, "release");
	CHECK(r && r->requests == 1 && r->bucket_counts[0] == 1 && r->answer_seconds_sum == 0);
	const Squash__RequestKindStats *bad = kind(&st, "invalid");
	CHECK(bad && bad->requests == 1 && bad->failures == 1);
	const Squash__RequestKindStats *s = kind(&st, "status");
	CHECK(s && s->requests == 0);
	CHECK_STR(request_stats_kind_name(SQUASH__REQUEST__OP_STEP_INFO), "step_info");
	return unit_exit_code();
}

#include "config.h"
#include "core/request_stats.h"

#include <stdint.h>
#include <time.h>

/* Milliseconds: prologs that share a mount answer in a few ms, a first
 * FUSE mount in tens to hundreds, a hung file system at request_timeout. */
static const unsigned bounds_ms[REQUEST_STATS_BOUNDS] = {
	1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
};

static const char *const kind_names[REQUEST_STATS_KINDS] = {
	"mount", "step_info", "release", "list", "gc", "status", "session_mount", "invalid",
};

struct kind_counters {
	uint64_t requests, failures, sum_us;
	uint64_t buckets[REQUEST_STATS_BOUNDS + 1];
};

static struct kind_counters counters[REQUEST_STATS_KINDS];

static unsigned kind_index(Squash__Request__OpCase op)
{
	switch (op) {
	case SQUASH__REQUEST__OP_MOUNT_JOB: return 0;
	case SQUASH__REQUEST__OP_STEP_INFO: return 1;
	case SQUASH__REQUEST__OP_RELEASE_JOB: return 2;
	case SQUASH__REQUEST__OP_LIST: return 3;
	case SQUASH__REQUEST__OP_GC: return 4;
	case SQUASH__REQUEST__OP_STATUS: return 5;
	case SQUASH__REQUEST__OP_SESSION_MOUNT: return 6;
	default: return 7;
	}
}

const char *request_stats_kind_name(Squash__Request__OpCase op)
{
	return kind_names[kind_index(op)];
}

long long request_stats_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void request_stats_record(Squash__Request__OpCase op, bool ok, long long us)
{
	struct kind_counters *c = &counters[kind_index(op)];
	unsigned b = 0;

	if (us < 0)
		us = 0;
	while (b < REQUEST_STATS_BOUNDS && (unsigned long long)us > bounds_ms[b] * 1000ULL)
		b++;
	__atomic_add_fetch(&c->buckets[b], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->sum_us, (uint64_t)us, __ATOMIC_RELAXED);
	if (!ok)
		__atomic_add_fetch(&c->failures, 1, __ATOMIC_RELAXED);
	/* Last: a reader that sees the request sees its bucket. */
	__atomic_add_fetch(&c->requests, 1, __ATOMIC_RELEASE);
}

void request_stats_fill(struct request_stats_view *v, Squash__NodeStatus *st)
{
	for (unsigned b = 0; b < REQUEST_STATS_BOUNDS; b++)
		v->bounds_s[b] = bounds_ms[b] / 1000.0;
	for (unsigned k = 0; k < REQUEST_STATS_KINDS; k++) {
		struct kind_counters *c = &counters[k];
		Squash__RequestKindStats *ks = &v->kinds[k];

		squash__request_kind_stats__init(ks);
		ks->kind = (char *)kind_names[k];
		ks->requests = __atomic_load_n(&c->requests, __ATOMIC_ACQUIRE);
		ks->failures = __atomic_load_n(&c->failures, __ATOMIC_RELAXED);
		ks->answer_seconds_sum = __atomic_load_n(&c->sum_us, __ATOMIC_RELAXED) / 1e6;
		/* Requests recorded while we read land in buckets we have not
		 * read yet: count the +Inf bucket as the rest, so the buckets
		 * always add up to requests. */
		uint64_t seen = 0;
		for (unsigned b = 0; b < REQUEST_STATS_BOUNDS; b++) {
			uint64_t n = __atomic_load_n(&c->buckets[b], __ATOMIC_RELAXED);
			if (seen + n > ks->requests)
				n = ks->requests - seen;
			v->buckets[k][b] = n;
			seen += n;
		}
		v->buckets[k][REQUEST_STATS_BOUNDS] = ks->requests - seen;
		ks->bucket_counts = v->buckets[k];
		ks->n_bucket_counts = REQUEST_STATS_BOUNDS + 1;
		v->kind_ptrs[k] = ks;
	}
	st->request_kinds = v->kind_ptrs;
	st->n_request_kinds = REQUEST_STATS_KINDS;
	st->latency_bounds_s = v->bounds_s;
	st->n_latency_bounds_s = REQUEST_STATS_BOUNDS;
}

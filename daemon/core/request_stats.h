/* squashd's request counters and answer-time histogram, per request kind,
 * for `squashctl status` and `squashctl metrics`. Updated by every worker
 * (lock-free atomics: a request must not wait for another to count it). */
#ifndef SQUASHD_REQUEST_STATS_H
#define SQUASHD_REQUEST_STATS_H

#include <stdbool.h>
#include <stddef.h>

#include "squash.pb-c.h"

/* Bucket upper bounds in milliseconds; one more bucket catches the rest. */
#define REQUEST_STATS_BOUNDS 13
/* mount, step_info, release, list, gc, status, session_mount, invalid */
#define REQUEST_STATS_KINDS 8

/* The kind's name as shown in metrics ("invalid" for an undecodable request). */
const char *request_stats_kind_name(Squash__Request__OpCase op);

/* Monotonic clock in microseconds, for the answer times. */
long long request_stats_now_us(void);

/* Counts one answered request; ok: answered OK; us: receipt to answer. */
void request_stats_record(Squash__Request__OpCase op, bool ok, long long us);

/* A snapshot for a status answer; owns its arrays (request_stats_free). */
struct request_stats_view {
	Squash__RequestKindStats kinds[REQUEST_STATS_KINDS];
	Squash__RequestKindStats *kind_ptrs[REQUEST_STATS_KINDS];
	uint64_t buckets[REQUEST_STATS_KINDS][REQUEST_STATS_BOUNDS + 1];
	double bounds_s[REQUEST_STATS_BOUNDS];
};

/* Fills view and points st's fields 20/21 into it. */
void request_stats_fill(struct request_stats_view *view, Squash__NodeStatus *st);

#endif

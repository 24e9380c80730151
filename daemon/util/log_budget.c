/* How many log lines one user's own requests may cost (log_budget.h). */
#include "config.h"

#include "util/log_budget.h"

#include <stddef.h>

/* uid's slot, or the one it takes over: a free one, else the one whose
 * uid asked longest ago if that was LOG_BUDGET_QUIET_MS ago; else the
 * shared one. */
static struct log_budget_slot *slot_of(struct log_budget *b, uint32_t uid, long long now_ms)
{
	struct log_budget_slot *oldest = NULL;

	for (size_t i = 0; i < LOG_BUDGET_USERS; i++) {
		struct log_budget_slot *s = &b->slots[i];

		if (s->used && s->uid == uid)
			return s;
		if (!oldest || !s->used || (oldest->used && s->seen_ms < oldest->seen_ms))
			oldest = s;
	}
	if (oldest->used && now_ms - oldest->seen_ms < LOG_BUDGET_QUIET_MS) {
		if (!b->shared.used)
			b->shared = (struct log_budget_slot){ .used = true, .tokens = LOG_BUDGET_BURST,
							      .refilled_ms = now_ms, .seen_ms = now_ms };
		return &b->shared;
	}
	*oldest = (struct log_budget_slot){ .uid = uid, .used = true, .tokens = LOG_BUDGET_BURST,
					    .refilled_ms = now_ms, .seen_ms = now_ms };
	return oldest;
}

bool log_budget_take(struct log_budget *b, uint32_t uid, long long now_ms,
		     unsigned long *left_out)
{
	return log_budget_take_from(b, uid, now_ms, left_out, NULL);
}

bool log_budget_take_from(struct log_budget *b, uint32_t uid, long long now_ms,
			  unsigned long *left_out, bool *shared)
{
	struct log_budget_slot *s;

	*left_out = 0;
	if (shared)
		*shared = false;
	if (uid == 0)
		return true;
	s = slot_of(b, uid, now_ms);
	if (shared)
		*shared = s == &b->shared;
	s->seen_ms = now_ms;
	if (now_ms > s->refilled_ms) {
		long long earned = (now_ms - s->refilled_ms) / LOG_BUDGET_REFILL_MS;

		if (earned > 0) {
			s->tokens = earned >= LOG_BUDGET_BURST - s->tokens ? LOG_BUDGET_BURST
									   : s->tokens + (unsigned)earned;
			s->refilled_ms += earned * LOG_BUDGET_REFILL_MS;
		}
	} else if (now_ms < s->refilled_ms) {
		s->refilled_ms = now_ms; /* a clock that went back */
	}
	if (s->tokens == 0) {
		s->left_out++;
		return false;
	}
	s->tokens--;
	*left_out = s->left_out;
	s->left_out = 0;
	return true;
}

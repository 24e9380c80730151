/* How many log lines one user's own requests may cost squashd's log.
 *
 * Any local user can send squashd request after request that it refuses
 * (bad frames, a full queue, silent connections), and each refusal is
 * worth a line. Unbounded, one user's flood would fill the journal and,
 * past journald's rate limit per service (RateLimitBurst), get squashd's
 * lines about every other user and the node's own faults dropped. So lines
 * about a non-root peer's requests draw on a budget of that peer's uid: a
 * burst of LOG_BUDGET_BURST, then one line per LOG_BUDGET_REFILL_MS; what
 * is left out is counted and said with the next line that is logged for
 * that uid. Root's requests (Slurm's prolog, epilog and steps) are never
 * held back: they are the node's own. */
#ifndef SQUASHD_LOG_BUDGET_H
#define SQUASHD_LOG_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define LOG_BUDGET_BURST 20
#define LOG_BUDGET_REFILL_MS 3000
/* Users tracked at once. A slot is taken over only from a uid quiet for
 * LOG_BUDGET_QUIET_MS, whose burst would be full again by then (so its
 * going costs nothing); while all are busier, further uids share one slot.
 * A user with a subordinate uid range (rootless containers: 65,536 uids)
 * otherwise got a fresh burst for each uid it took turns with. */
#define LOG_BUDGET_USERS 128
#define LOG_BUDGET_QUIET_MS ((long long)LOG_BUDGET_BURST * LOG_BUDGET_REFILL_MS)

struct log_budget_slot {
	uint32_t uid;
	bool used;
	unsigned tokens;
	long long refilled_ms;   /* when tokens were last topped up */
	long long seen_ms;       /* when a line was last asked for */
	unsigned long left_out;  /* lines not logged since the last one that was */
};

struct log_budget {
	struct log_budget_slot slots[LOG_BUDGET_USERS];
	struct log_budget_slot shared; /* the uids past a full table, together */
};

/* Whether a line about uid's request may be logged at now_ms. When it may,
 * *left_out is how many were not since the last one logged (then reset);
 * when not, the line is counted. uid 0 always may. */
bool log_budget_take(struct log_budget *b, uint32_t uid, long long now_ms,
		     unsigned long *left_out);
/* The same; *shared (when not NULL) says the line drew on the slot the
 * uids past a full table share, and *left_out counts lines of all of them. */
bool log_budget_take_from(struct log_budget *b, uint32_t uid, long long now_ms,
			  unsigned long *left_out, bool *shared);

#endif

/* Why a step cannot use its images, kept from slurmstepd's set-up until
 * the tasks print it: errors logged earlier do not reach the user
 * reliably. Every node's first task prints it and every task fails, so
 * the job fails with the reason in its output and the node stays up. */
#ifndef SPANK_SQUASH_STEP_FAILURE_H
#define SPANK_SQUASH_STEP_FAILURE_H

/* The end of a reason the user cannot fix (the node's fault, or its
 * configuration's): whom to ask, and what to give them. Its %s is the
 * node's name. */
#define SQUASH_ASK_ADMIN ". This is not a mistake in your job: ask your administrator to look " \
	"at squashd on %s (squashctl health there), quoting this message"

/* Keeps the reason (the first one wins) and logs it. */
void squash_step_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The kept reason, or NULL when all is well. */
const char *squash_step_failure(void);

void squash_step_failure_clear(void);

#endif

/* Why a step cannot use its images, kept from slurmstepd's set-up until
 * the tasks print it: errors logged earlier do not reach the user
 * reliably. Every node's first task prints it and every task fails, so
 * the job fails with the reason in its output and the node stays up. */
#ifndef SPANK_SQUASH_STEP_FAILURE_H
#define SPANK_SQUASH_STEP_FAILURE_H

/* Keeps the reason (the first one wins) and logs it. */
void squash_step_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The kept reason, or NULL when all is well. */
const char *squash_step_failure(void);

void squash_step_failure_clear(void);

#endif

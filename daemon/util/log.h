/* squashd logging. Every line starts with "squashd: " and a level and goes
 * to stderr; under systemd (JOURNAL_STREAM set) lines go to the journal
 * instead, with the fields of the request being served: JOB_ID, USER_ID,
 * IMAGE, MODE (journalctl -u squashd JOB_ID=123). */
#ifndef SQUASHD_LOG_H
#define SQUASHD_LOG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void log_init(bool debug);
/* In a long-lived child that closed the descriptors it inherited (the
 * spawner): stderr set up again for it, so that it never waits for its
 * log either. */
void log_after_fork(void);
/* SIGHUP may turn debug messages on or off. */
void log_set_debug(bool debug);
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A warning about what a request from peer_uid did (refused, malformed):
 * a non-root peer's lines draw on its budget (log_budget.h), and the
 * first line logged after some were left out says how many. peer_uid is
 * the peer's user (peer.h's peer.user: the uids of a user's namespaces
 * are that user's), PEER_USER_GONE for processes gone before squashd
 * looked. */
void log_peer_warning(uint32_t peer_uid, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same at info level (a user's mistake in a request of its own). */
void log_peer_info(uint32_t peer_uid, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the calling thread is working on (thread-local; a worker sets it
 * for its request and clears it when done). uid < 0: unknown. */
void log_context_job(uint32_t job_id, long uid);
void log_context_image(const char *image, const char *mode);
/* The user whose own request or process the calling thread works for
 * (0: root, the node's own: none): its info and warning lines draw on
 * that user's budget as log_peer_* do, so a user who loops sessions or
 * kills their reader costs the log at most its burst, then a line per
 * LOG_BUDGET_REFILL_MS. Its error lines draw on a budget of their own
 * (the same size): a flood of refusals hides none of them, and errors a
 * user can cause at will cannot flood the journal. */
void log_context_peer(uint32_t peer_uid);
void log_context_clear(void);

/* The calling thread's context as journal fields "NAME=value", in the order
 * JOB_ID, USER_ID, IMAGE, MODE, known ones only. Returns how many. */
#define LOG_FIELDS_MAX 4
#define LOG_FIELD_LEN (PATH_MAX + 16)
size_t log_context_fields(char fields[LOG_FIELDS_MAX][LOG_FIELD_LEN]);

#endif

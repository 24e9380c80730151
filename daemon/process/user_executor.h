/* Work done on behalf of one user (what follows a process's exit: a
 * session's or step's release, a reader's restart, a mount's teardown)
 * may wait on that user's processes and file systems, up to
 * request_timeout on a stopped reader. So it never runs on a thread that
 * other users' work shares: each user's work runs in order on a thread of
 * that user's, made when work arrives and ended when the user has none
 * left. At most USER_EXECUTOR_THREADS such threads run; a user arriving
 * past that waits for the first thread to go idle, which takes the user
 * over. The time each user's work took is counted (for status). */
#ifndef SQUASHD_USER_EXECUTOR_H
#define SQUASHD_USER_EXECUTOR_H

#include <stddef.h>
#include <sys/types.h>

#define USER_EXECUTOR_THREADS 64
/* The queue of work that is nobody's (kernel mounts' and merges'
 * teardowns: registry.h's MOUNT_OWNER_ANY): the node's own, so what it
 * logs draws on no user's budget. */
#define USER_EXECUTOR_NOBODY ((uid_t)-1)

typedef void (*user_work_fn)(void *arg);

/* Queues fn(arg) behind uid's earlier work. Returns 0, or -1 when out of
 * memory (nothing queued: the caller runs it itself). */
int user_executor_run(uid_t uid, user_work_fn fn, void *arg);

struct user_executor_use {
	uid_t uid;
	unsigned long long busy_ms; /* time spent in uid's work since start */
	unsigned long long done;    /* pieces of work finished */
	unsigned queued;            /* waiting or running now */
	unsigned threads;           /* serving uid now: 0 or 1 (one thread per user) */
};

/* The users whose work ran, up to max of them, into out. Returns how
 * many were written. */
size_t user_executor_usage(struct user_executor_use *out, size_t max);

/* How many of the executor's threads run now (for status and tests). */
unsigned user_executor_threads(void);

/* At shutdown: waits until no work is left or deadline_ms (monotonic)
 * passes (waits on users' processes give up when squashd stops:
 * child_process.h). Returns the number of pieces of work still queued. */
unsigned user_executor_drain(long long deadline_ms);

#endif

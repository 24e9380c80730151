/* The spawner: a small single-threaded process squashd forks at start,
 * before any thread, that forks the per-request children (image openers)
 * in squashd's place.
 *
 * Why: fork() in squashd itself copies the page tables of a process with
 * hundreds of worker threads, holds every malloc arena and the NSS lock
 * while it does, and then makes every thread pay copy-on-write faults
 * with TLB shootdowns; and the child's exit tears the copy down again.
 * Under a burst of 128 job starts that was most of squashd's CPU time.
 * The spawner's address space is the small one squashd had at start, so
 * its forks cost a fraction, and squashd's threads never stop for them.
 *
 * What a child does is unchanged: the same code runs in it (the op's run
 * function, registered at start), with the same identity drop. A request
 * is one datagram: a header, the op's payload (fixed size per op), the
 * socket the child answers on and up to max_fds more descriptors for the
 * child. The spawner makes the child with clone3(CLONE_PIDFD) (clone()
 * where seccomp refuses clone3, as systemd's RestrictNamespaces= does), so its
 * pidfd names it even if it has already exited, and first sends the
 * answer socket that pidfd (struct spawner_pidfd_msg), so squashd can
 * kill it on timeout; the child's own answer may come before or after it.
 * Children are reaped by the kernel (SIGCHLD ignored in the spawner), so
 * squashd only ever kills and forgets them; except an op's children that
 * are squashd's own (CLONE_PARENT: FUSE servers, which squashd watches
 * and reaps, and whose exit status it logs).
 *
 * The spawner never waits for a child: a user who stops or traces a
 * child that is becoming theirs (between its identity drop and exec)
 * stops that child only, never the spawner or a thread of squashd.
 *
 * Nor does it ever hold a user's file: it closes what it was passed, and
 * the close of a file on a FUSE mount waits for FLUSH, which that mount's
 * server may never answer (a site's allow_other mount over a user's own).
 * A child that needs such a file (an image) gets it from squashd over its
 * answer socket instead (spawner_send_child_fds, spawner_child_fds),
 * never through the spawner.
 *
 * When the spawner is not running (unit tests, or it died), callers fork
 * themselves as before. */
#ifndef SQUASHD_SPAWNER_H
#define SQUASHD_SPAWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The ops, in the order spawner_start gets them. */
enum spawner_op_id {
	SPAWNER_OPEN_IMAGE, /* mount/image_open.c */
	SPAWNER_FUSE_PROBE, /* mount/fuse_probe.c */
	SPAWNER_START_SERVER, /* process/server_spawn.c */
	SPAWNER_KERNEL_PREFETCH, /* mount/kernel_prefetch.c */
	SPAWNER_N_OPS
};

/* What a child runs: answers on sock, gets the request's other
 * descriptors in fds, never returns. */
struct spawner_op {
	size_t payload_size;
	void (*run)(int sock, const void *payload, const int *fds, size_t nfds)
		__attribute__((noreturn));
	size_t max_fds;     /* descriptors besides the answer socket */
	bool squashd_child; /* made squashd's child (CLONE_PARENT) */
};

/* The first message on the answer socket: the child's pidfd, in SCM_RIGHTS. */
#define SPAWNER_PIDFD_MAGIC 0x53505744u /* "SPWD" */
struct spawner_pidfd_msg {
	uint32_t magic;
	int32_t pid;
};
/* Instead, when the spawner could make no child: the same message, without
 * a descriptor, with the errno of clone in pid; then EOF. */
#define SPAWNER_FAILED_MAGIC 0x53504646u /* "SPFF" */

/* The errno in a failure message of n bytes with nfds descriptors, or 0
 * when it is not one. */
static inline int spawner_failure_errno(const void *msg, size_t n, int nfds)
{
	const struct spawner_pidfd_msg *m = msg;

	return n == sizeof(*m) && nfds == 0 && m->magic == SPAWNER_FAILED_MAGIC && m->pid > 0
		       ? m->pid
		       : 0;
}

/* squashd's side: sends the child of a request on answer socket sock
 * (the request's fds[0], squashd's end) its descriptors, once the
 * request is sent. 0, or -1. */
int spawner_send_child_fds(int sock, const int *fds, size_t n);

/* squashd's side: the child's pid and pidfd from the first message on
 * answer socket sock, waiting up to timeout_ms for it. The pid, or -1
 * with errno: the spawner's clone failed (its errno), ETIMEDOUT, or
 * EAGAIN for anything else. */
pid_t spawner_receive_pidfd(int sock, int timeout_ms, int *pidfd);

/* The child's side: the descriptors squashd sent on sock, first thing;
 * how many (at most max), or -1 (none came: squashd gave up). */
int spawner_child_fds(int sock, int *fds, size_t max);

/* Forks the spawner; call before any thread exists. ops stays valid for
 * good. Returns 0, or -1 (logged; callers then fork themselves). */
int spawner_start(const struct spawner_op *ops, size_t n_ops);

/* Asks the spawner to run ops[op] with payload, answering on answer_fd
 * (which the caller keeps and closes). Returns 0, or -1 when there is no
 * spawner (never started, or gone): the caller forks itself. */
int spawner_request(uint32_t op, const void *payload, size_t len, int answer_fd);
/* The same with descriptors for the child: fds[0] is the answer socket,
 * fds[1..nfds-1] reach the child's run function in order. */
int spawner_request_fds(uint32_t op, const void *payload, size_t len, const int *fds, size_t nfds);

/* At exit: tells the spawner to go and waits for it (up to 2 s). */
void spawner_stop(void);

#endif

/* A call that may wait on a user's FUSE server (a mount over the user's
 * FUSE mounts asks each of them for STATFS, LOOKUP and GETATTR), made on a
 * thread of its own so that the request waiting for it can give up at its
 * deadline: the request fails with a reason and its worker serves others,
 * whatever the server does. The call itself cannot be interrupted; it
 * ends when the server answers or dies (the caller kills it), and what it
 * made then is undone by the caller's late function. */
#ifndef SQUASHD_DEADLINE_CALL_H
#define SQUASHD_DEADLINE_CALL_H

/* Runs call(arg) on a thread of its own and waits until it returns or
 * until deadline_ms (monotonic). Returns 1 when it returned in time (arg
 * is the caller's again), 0 when the deadline passed first: from then on
 * arg is the thread's, which, once call returns, runs late(arg) (may be
 * NULL) and then release(arg). Returns -1 (errno set) when no thread could
 * be started; nothing ran. */
int deadline_call(void (*call)(void *arg), void (*late)(void *arg), void (*release)(void *arg),
		  void *arg, long long deadline_ms);

#endif

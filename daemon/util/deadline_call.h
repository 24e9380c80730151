/* A call that may wait on a user's FUSE server (a mount over the user's
 * FUSE mounts asks each of them for STATFS, LOOKUP and GETATTR), made on a
 * thread of its own so that the request waiting for it can give up at its
 * deadline: the request fails with a reason and its worker serves others,
 * whatever the server does. The call itself cannot be interrupted; it
 * ends when the server answers or dies (the caller kills it), and what it
 * made then is undone by the caller's late function.
 *
 * A call given up on keeps its thread until then, and a user who stops
 * each server squashd restarts could keep many: so each call names an
 * owner (the uid it is made for), and an owner has at most `limit` of
 * these calls running at once, given up on or not. */
#ifndef SQUASHD_DEADLINE_CALL_H
#define SQUASHD_DEADLINE_CALL_H

#include <stddef.h>

/* Runs call(arg) on a thread of its own and waits until it returns or
 * until deadline_ms (monotonic). Returns 1 when it returned in time (arg
 * is the caller's again), 0 when the deadline passed first: from then on
 * arg is the thread's, which, once call returns, runs late(arg) (may be
 * NULL) and then release(arg). An owner has at most limit (0: no bound)
 * such calls running, in flight or given up on: one more waits for a
 * place until deadline_ms, or not at all when the limit's calls are all
 * given up on. Returns -1 when nothing ran: errno EBUSY when no place
 * came, else why no thread could be started. */
int deadline_call(unsigned owner, unsigned limit, void (*call)(void *arg), void (*late)(void *arg),
		  void (*release)(void *arg), void *arg, long long deadline_ms);

/* The calls of owner given up on that still run; all of owner's calls
 * that run. */
unsigned deadline_calls_given_up(unsigned owner);
unsigned deadline_calls_running(unsigned owner);

struct deadline_owner_use {
	unsigned owner;
	unsigned given_up; /* calls given up on still running */
};

/* The owners with calls given up on still running (at most max of
 * them, in no order); returns how many were written. */
size_t deadline_calls_given_up_each(struct deadline_owner_use *out, size_t max);

#endif

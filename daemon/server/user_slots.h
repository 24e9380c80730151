/* How many workers one user's requests hold at once (issue 30): a user
 * whose requests get stuck (a hung file system of theirs, a FUSE server
 * that never answers) must not take squashd's pool of workers from
 * everyone else. A request counts for the user it works for: the job's
 * user for the prolog's, the epilog's and the steps' requests (which come
 * from root), the peer for everything else; uid 0's are never held back. */
#ifndef SQUASHD_USER_SLOTS_H
#define SQUASHD_USER_SLOTS_H

#include <stdbool.h>
#include <sys/types.h>

/* Takes one of uid's max slots (max 0: no limit). When all are taken the
 * request waits for one, queued, until deadline_ms (monotonic); returns
 * false then (the caller refuses it; *busy gets how many uid holds).
 * Returns true with a slot to give back with user_slot_put. */
bool user_slot_take(uid_t uid, unsigned max, long long deadline_ms, unsigned *busy);
void user_slot_put(uid_t uid);

#endif

/* A fair share of a long list of pids, round after round.
 *
 * A watch that can look at only so many processes per round (the stopped
 * FUSE servers, core/stopped_readers.c) takes the next ones each round, in
 * pid order, so that no process is left out for good because others came
 * first: a user with many mounts (one server per mount with squashfuse_ll)
 * cannot push another user's server out of the watch. */
#ifndef SQUASHD_PID_ROTATION_H
#define SQUASHD_PID_ROTATION_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Sorts all[0..*n) and drops repeats (*n becomes the distinct count), then
 * copies up to max of them into out, starting at *cursor (wrapping), and
 * moves *cursor past them. Returns how many were copied. */
size_t pid_rotation_pick(pid_t *all, size_t *n, size_t *cursor, pid_t *out, size_t max);

/* Whether pid is in all[0..n), sorted by pid_rotation_pick. */
bool pid_rotation_has(const pid_t *all, size_t n, pid_t pid);

#endif

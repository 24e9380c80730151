/* One thread that watches processes through their pidfds: FUSE servers
 * (squashd's children, or adopted after a restart, which only a pidfd can
 * watch), sessions' and steps' processes, and children given up on. When
 * one exits the watcher reaps it if it is squashd's child and hands the
 * callback to the user's thread (process/user_executor.h): the watcher is
 * every user's, and a callback may wait on its user's processes (a
 * teardown on a stopped reader), so it never runs one itself. Starts on
 * first use. */
#ifndef SQUASHD_PROCESS_WATCH_H
#define SQUASHD_PROCESS_WATCH_H

#include <sys/types.h>

/* status: wait(2)-style, or -1 when the process was not squashd's child. */
typedef void (*process_exit_fn)(void *arg, pid_t pid, int status);

/* Watches pidfd (ownership passes to the watcher, which closes it once the
 * process is reaped). fn (NULL: none) runs on uid's thread, after uid's
 * earlier callbacks. Returns 0, or -1 (out of memory, no thread). */
int process_watch_add(int pidfd, pid_t pid, uid_t uid, process_exit_fn fn, void *arg);

#endif

/* One thread that watches processes through their pidfds: FUSE servers
 * (squashd's children, or adopted after a restart, which only a pidfd can
 * watch) and children given up on. When one exits the watcher reaps it if
 * it is squashd's child and calls back. Starts on first use. */
#ifndef SQUASHD_PROCESS_WATCH_H
#define SQUASHD_PROCESS_WATCH_H

#include <sys/types.h>

/* status: wait(2)-style, or -1 when the process was not squashd's child. */
typedef void (*process_exit_fn)(void *arg, pid_t pid, int status);

/* Watches pidfd (ownership passes to the watcher, which closes it after the
 * callback). Returns 0, or -1 (out of memory, no thread). */
int process_watch_add(int pidfd, pid_t pid, process_exit_fn fn, void *arg);

#endif

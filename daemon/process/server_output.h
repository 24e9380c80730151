/* What FUSE servers write to stdout and stderr reaches squashd's log
 * through a pipe, each line marked with the server's pid and uid and
 * rate-limited per server: a user's reader shares no descriptor of
 * squashd's journal and cannot flood it. One thread reads them all;
 * it starts on first use. */
#ifndef SQUASHD_SERVER_OUTPUT_H
#define SQUASHD_SERVER_OUTPUT_H

#include <sys/types.h>

/* Reads fd (a pipe's read end; the watcher owns and closes it at EOF)
 * and logs its lines as those of server pid (program path) run as uid. */
void server_output_watch(int fd, pid_t pid, uid_t uid, const char *path);

#endif

/* What FUSE servers write to stdout and stderr reaches squashd's log
 * through a pipe, each line marked with the server's pid and uid and
 * rate-limited per server: a user's reader shares no descriptor of
 * squashd's journal and cannot flood it. One thread reads them all;
 * it starts on first use. */
#ifndef SQUASHD_SERVER_OUTPUT_H
#define SQUASHD_SERVER_OUTPUT_H

#include <stddef.h>
#include <sys/types.h>

/* Reads fd (a pipe's read end; the watcher owns and closes it at EOF, or
 * once the server behind pidfd exits, whoever else still holds the write
 * end) and logs its lines as those of server pid (program path) run as
 * uid. pidfd stays the caller's (-1: only EOF ends it). */
void server_output_watch(int fd, int pidfd, pid_t pid, uid_t uid, const char *path);

/* One user's servers' output budgets now (summed over their streams):
 * what is spent of each stream's burst (BURST lines, BYTES_BURST bytes),
 * refilled up to now. For squashctl status. */
struct server_output_use {
	uid_t uid;
	unsigned long long lines, lines_burst; /* lines logged of the burst; the bursts */
	unsigned long long bytes, bytes_burst; /* bytes read of the burst; the bursts */
};

/* The users with a server's output watched now, up to max into out;
 * returns how many were written. */
size_t server_output_usage(struct server_output_use *out, size_t max);

#endif

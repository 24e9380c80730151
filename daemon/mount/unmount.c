#include "config.h"

#include "mount/unmount.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mountinfo.h"
#include "process/child_process.h"
#include "process/reader_process.h"
#include "clock.h"
#include "util/log.h"

#define EBUSY_RETRY_MS 20
#define BUSY_RETRY_MAX_MS 300
/* How long the kernel gets to end a FUSE connection after its last mount
 * went (it does so within the unmount; this is slack). */
#define CONNECTION_END_GRACE_MS 200

/* The mountinfo scan, where statx cannot tell (before Linux 5.8). */
static int listed_as_mount_point(const char *path)
{
	char want[4096];
	char *line = NULL;
	size_t cap = 0, len;
	int found = 0;
	FILE *f;

	/* mountinfo never shows a trailing slash except for "/" itself. */
	snprintf(want, sizeof(want), "%s", path);
	len = strlen(want);
	while (len > 1 && want[len - 1] == '/')
		want[--len] = '\0';

	f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL) {
		log_warning("cannot read /proc/self/mountinfo: %s",
			    strerror(errno));
		return 0;
	}
	/* Fields: id parent major:minor root mountpoint options ... */
	while (!found && getline(&line, &cap, f) > 0) {
		char *field = squash_mountinfo_mount_point(line);

		if (field == NULL)
			continue;
		found = strcmp(field, want) == 0;
	}
	free(line);
	fclose(f);
	return found;
}

int is_mount_point(const char *path)
{
	struct statx stx;

	/* From the kernel's dentries and cached attributes only (no attribute
	 * asked for, AT_STATX_DONT_SYNC): no file system is asked, so a FUSE
	 * server its user stopped cannot hold it; and no mountinfo is read,
	 * which one user's own FUSE mounts can make megabytes long for every
	 * unmount of everyone's. */
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, 0,
		  &stx) != 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : listed_as_mount_point(path);
	if (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
		return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	return listed_as_mount_point(path);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int mount_points_read(struct mount_points *mp)
{
	char *line = NULL;
	size_t cap = 0, room = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	mp->paths = NULL;
	mp->n = 0;
	if (f == NULL) {
		log_warning("cannot read /proc/self/mountinfo: %s", strerror(errno));
		return -1;
	}
	while (getline(&line, &cap, f) > 0) {
		char *field = squash_mountinfo_mount_point(line), *copy;

		if (field == NULL)
			continue;
		if (mp->n == room) {
			size_t more = room ? room * 2 : 256;
			char **grown = realloc(mp->paths, more * sizeof(*grown));

			if (!grown)
				goto oom;
			mp->paths = grown;
			room = more;
		}
		if (!(copy = strdup(field)))
			goto oom;
		mp->paths[mp->n++] = copy;
	}
	free(line);
	fclose(f);
	qsort(mp->paths, mp->n, sizeof(*mp->paths), by_path);
	return 0;
oom:
	log_warning("out of memory reading /proc/self/mountinfo");
	free(line);
	fclose(f);
	mount_points_free(mp);
	return -1;
}

int mount_points_has(const struct mount_points *mp, const char *path)
{
	char want[4096];
	const char *key = want;
	size_t len;

	snprintf(want, sizeof(want), "%s", path);
	len = strlen(want);
	while (len > 1 && want[len - 1] == '/')
		want[--len] = '\0';
	return bsearch(&key, mp->paths, mp->n, sizeof(*mp->paths), by_path) != NULL;
}

void mount_points_free(struct mount_points *mp)
{
	for (size_t i = 0; i < mp->n; i++)
		free(mp->paths[i]);
	free(mp->paths);
	mp->paths = NULL;
	mp->n = 0;
}

/* Unmounts every mount stacked on path. Busy mounts are retried until
 * busy_deadline and then detached lazily. Returns 0 once nothing is
 * mounted there, 1 when one was detached lazily (in use: it lives on
 * until its last user lets go), -1 with err set otherwise. */
static int unmount_all(const char *path, long long busy_deadline, char *err,
		       size_t errlen)
{
	int lazily = 0;

	/* Bounded: each round removes one mount or ends the loop. */
	for (int rounds = 0; rounds < 64; rounds++) {
		if (umount2(path, UMOUNT_NOFOLLOW) == 0)
			continue;
		if (errno == EINVAL || errno == ENOENT)
			return lazily; /* not (or no longer) a mount point */
		if (errno == EBUSY && squash_now_ms() < busy_deadline) {
			usleep(EBUSY_RETRY_MS * 1000);
			continue;
		}
		if (errno == EBUSY) {
			log_warning("%s is still busy; detaching it lazily",
				    path);
			if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
				lazily = 1;
				continue;
			}
			if (errno == EINVAL || errno == ENOENT)
				return lazily;
		}
		snprintf(err, errlen, "cannot unmount %s: %s", path,
			 strerror(errno));
		return -1;
	}
	if (is_mount_point(path)) {
		snprintf(err, errlen, "%s is still mounted after 64 unmounts",
			 path);
		return -1;
	}
	return lazily;
}

/* Whether the FUSE connection conn_fd still lives after its mount's
 * unmount: the kernel ends a connection with its last mount (its device
 * then polls POLLERR), so one that lives on is mounted elsewhere still: a
 * job's namespace that an admin's release or gc left running, or a copy
 * a user made. */
static bool connection_lives_on(int conn_fd, long long deadline)
{
	long long left = deadline - squash_now_ms();
	struct pollfd p = { .fd = conn_fd, .events = 0 };

	if (conn_fd < 0)
		return false;
	if (left > CONNECTION_END_GRACE_MS)
		left = CONNECTION_END_GRACE_MS;
	/* Woken at once by the kernel's end of the connection. */
	return poll(&p, 1, left > 0 ? (int)left : 0) == 0;
}

/* Waits (woken by its exit) for the server to end after its mount went
 * away, and kills it when it does not. pidfd may be -1 (then one is made
 * from the pid, which may have been reused meanwhile). Only a process
 * that is still a FUSE server squashd could have started for uid is
 * signalled (reader_process.h); one given by pidfd is the very process
 * squashd started or adopted, one found by pid must be adopted, i.e.
 * older than this squashd. A server whose connection lives on cannot
 * end by itself until every copy of the mount goes, which may be a job's
 * whole run: it is killed without waiting. */
static void stop_server(pid_t pid, int pidfd, uid_t uid, bool lives_on, long long deadline)
{
	char why[128];
	bool given = pidfd >= 0;
	long long total = deadline - squash_now_ms();
	/* Keep a slice of the time for SIGKILL to take effect. */
	long long kill_slice = total / 4 < 500 ? total / 4 : 500;
	int own_fd = -1, status;

	if (pidfd < 0) {
		pidfd = own_fd = child_pidfd(pid);
		if (pidfd < 0)
			return; /* already gone */
	}
	if (child_wait(pidfd, lives_on ? squash_now_ms() : deadline - kill_slice, &status) == 1)
		goto out;
	if (reader_process_kind(pidfd, pid, uid, !given, why, sizeof(why)) == READER_NONE) {
		log_warning("not signalling pid %d: %s", (int)pid, why);
		goto out;
	}
	if (lives_on)
		log_warning("FUSE server %d still serves copies of the mount outside squashd's "
			    "namespace after its unmount (a job released while it still runs, or a "
			    "user's own namespace); killing it", (int)pid);
	else
		log_warning("FUSE server %d did not exit after unmount; killing it", (int)pid);
	child_kill(pidfd);
	if (child_wait(pidfd, deadline, &status) != 1)
		log_warning("FUSE server %d survived SIGKILL (stuck in the kernel?)",
			    (int)pid);
out:
	if (own_fd >= 0)
		close(own_fd);
}

enum result unmount_image(const char *mountpoint, pid_t server_pid, int server_pidfd,
			  uid_t server_uid, int conn_fd, int timeout_ms, char *err, size_t errlen)
{
	long long start = squash_now_ms();
	long long deadline = start + (timeout_ms > 0 ? timeout_ms : 0);
	/* Steps no longer hold copies of node-level mounts, so a busy mount is
	 * rare (an admin's shell in it): retry briefly, then detach lazily. */
	long long busy_until = start + (timeout_ms / 2 < BUSY_RETRY_MAX_MS ? timeout_ms / 2
									: BUSY_RETRY_MAX_MS);

	int lazily = unmount_all(mountpoint, busy_until, err, errlen);

	if (lazily < 0)
		return RESULT_NODE_ERROR;
	if (is_mount_point(mountpoint)) {
		snprintf(err, errlen, "%s is still mounted", mountpoint);
		return RESULT_NODE_ERROR;
	}
	/* Before waiting for the server: removing the mount point detaches
	 * the copies of the mount in every other mount namespace (Linux
	 * 3.18 on), such as a user's own `unshare -Urm` or a squash-shell
	 * session made after it, which propagation never reaches (private,
	 * or locked in a user namespace). Until they go the mount lives on:
	 * its reader's connection would not end, so it would be killed at
	 * the deadline on its user's time; a loop device would stay bound. */
	if (rmdir(mountpoint) < 0 && errno != ENOENT)
		log_warning("cannot remove mount point %s: %s", mountpoint,
			    strerror(errno));
	/* A lazily detached mount is still in use here (an admin's shell in
	 * it), and may be let go of before the deadline. */
	if (server_pid > 0)
		stop_server(server_pid, server_pidfd, server_uid,
			    !lazily && connection_lives_on(conn_fd, deadline), deadline);
	return RESULT_OK;
}

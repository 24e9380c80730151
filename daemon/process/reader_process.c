/* Telling squashd's FUSE servers from other processes (reader_process.h). */
#include "config.h"

#include "process/reader_process.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/proc_uids.h"

static struct binary {
	char path[PATH_MAX]; /* resolved: what /proc/PID/exe names */
	dev_t dev;
	ino_t ino;
	bool known;
} binaries[2]; /* READER_SQUASH_READER - 1, READER_SQUASHFUSE - 1 */

static unsigned long long own_start;
static dev_t own_mnt_ns_dev;
static ino_t own_mnt_ns_ino;

static void remember(struct binary *b, const char *path)
{
	struct stat st;
	char real[PATH_MAX];

	b->known = path && realpath(path, real) && stat(real, &st) == 0 && S_ISREG(st.st_mode);
	if (!b->known)
		return;
	snprintf(b->path, sizeof(b->path), "%s", real);
	b->dev = st.st_dev;
	b->ino = st.st_ino;
}

/* The file name at dir/name, at most len - 1 bytes; "" when unreadable. */
static void read_small(int dir, const char *name, char *buf, size_t len)
{
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
}

unsigned long long reader_process_start_time(int proc_dir)
{
	char buf[1024];
	unsigned long long start = 0;

	read_small(proc_dir, "stat", buf, sizeof(buf));
	/* comm may hold spaces and parentheses: count from the last ')'. */
	char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &start) != 1)
		return 0;
	return start;
}

/* Whether the stat at dir/name says stopped (T: a signal; t: a tracer). */
static bool stat_stopped(int dir, const char *name)
{
	char buf[1024];

	read_small(dir, name, buf, sizeof(buf));
	/* comm may hold spaces and parentheses: the state follows the last ')'. */
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

bool reader_process_stopped(pid_t pid)
{
	char path[32], name[32];
	bool stopped;
	int dir, tasks;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if ((dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	stopped = stat_stopped(dir, "stat");
	/* A tracer stops one thread at a time: the process runs on while the
	 * requests its stopped threads took wait (a multithreaded
	 * squashfuse_ll; squash-reader --serve cannot be traced by its user,
	 * reader/untraceable.h). */
	tasks = stopped ? -1 : openat(dir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(dir);
	if (tasks < 0 || !(d = fdopendir(tasks))) {
		if (tasks >= 0)
			close(tasks);
		return stopped;
	}
	for (unsigned n = 0; !stopped && n < READER_PROCESS_TASKS_LOOKED_AT && (e = readdir(d)); n++)
		if (e->d_name[0] != '.' && snprintf(name, sizeof(name), "%s/stat", e->d_name) < (int)sizeof(name))
			stopped = stat_stopped(tasks, name);
	closedir(d);
	return stopped;
}

void reader_process_init(const char *squash_reader, const char *squashfuse)
{
	struct stat st;
	int self = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	remember(&binaries[READER_SQUASH_READER - 1], squash_reader);
	remember(&binaries[READER_SQUASHFUSE - 1], squashfuse);
	own_start = self >= 0 ? reader_process_start_time(self) : 0;
	if (self >= 0 && fstatat(self, "ns/mnt", &st, 0) == 0) {
		own_mnt_ns_dev = st.st_dev;
		own_mnt_ns_ino = st.st_ino;
	}
	if (self >= 0)
		close(self);
}

static bool same_mount_namespace(int dir)
{
	struct stat st;

	return fstatat(dir, "ns/mnt", &st, 0) == 0 && st.st_dev == own_mnt_ns_dev &&
	       st.st_ino == own_mnt_ns_ino;
}

bool reader_process_in_own_mount_ns(pid_t pid)
{
	char path[32];
	int dir;
	bool same;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if ((dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	same = same_mount_namespace(dir);
	close(dir);
	return same;
}

/* Which binary the process runs. Only a process whose executable the
 * kernel names as one of ours gets a look at the file itself, through an
 * O_PATH descriptor of the magic link (no open, no lookup in the user's
 * file systems) and statx with AT_STATX_DONT_SYNC (a FUSE or network file
 * system answers from its cache): a user's process running a binary of
 * their own FUSE mount, stopped, cannot make this wait. */
static enum reader_kind executable(int dir)
{
	char name[PATH_MAX + 16];
	ssize_t n = readlinkat(dir, "exe", name, sizeof(name) - 1);
	struct statx stx;

	if (n <= 0)
		return READER_NONE;
	name[n] = '\0';
	for (int k = 0; k < 2; k++) {
		const struct binary *b = &binaries[k];
		size_t len = strlen(b->path);

		if (!b->known || strncmp(name, b->path, len) ||
		    (name[len] && strcmp(name + len, " (deleted)")))
			continue;
		int fd = openat(dir, "exe", O_PATH | O_CLOEXEC);
		int r = fd >= 0 ? statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC,
					STATX_TYPE | STATX_INO | STATX_NLINK, &stx) : -1;
		if (fd >= 0)
			close(fd);
		if (r < 0)
			continue;
		dev_t dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
		if (dev == b->dev && stx.stx_ino == b->ino)
			return (enum reader_kind)(k + 1);
		/* The binary replaced (a package upgrade) while the reader of
		 * the previous squashd ran: the kernel names the old file
		 * "(deleted)". Only where no user could have put the name on
		 * a file of their own: squashd's mount namespace (a user may
		 * bind anything over the path in a namespace of their own),
		 * the binary's file system, no link left. */
		if (name[len] && dev == b->dev && stx.stx_nlink == 0 && same_mount_namespace(dir))
			return (enum reader_kind)(k + 1);
	}
	return READER_NONE;
}

enum reader_kind reader_process_kind(int pidfd, pid_t pid, uid_t uid, bool adopted, char *why,
				     size_t whylen)
{
	char path[64];
	enum reader_kind kind = READER_NONE;
	struct pollfd exited = { .fd = pidfd, .events = POLLIN };

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	/* Opened after the pidfd and checked against it below: while the
	 * pidfd's process runs, pid is its and this directory shows it. */
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0) {
		snprintf(why, whylen, "pid %d is gone", (int)pid);
		return READER_NONE;
	}
	if (!proc_uids_are(dir, uid))
		snprintf(why, whylen, "pid %d does not run as uid %u alone", (int)pid, (unsigned)uid);
	else if ((kind = executable(dir)) == READER_NONE)
		snprintf(why, whylen, "pid %d does not run squash-reader or squashfuse_ll", (int)pid);
	else if (adopted && !(own_start && reader_process_start_time(dir) &&
			      reader_process_start_time(dir) < own_start)) {
		snprintf(why, whylen, "pid %d started after this squashd", (int)pid);
		kind = READER_NONE;
	}
	close(dir);
	if (kind != READER_NONE && (pidfd < 0 || poll(&exited, 1, 0) != 0)) {
		snprintf(why, whylen, "pid %d has ended", (int)pid);
		kind = READER_NONE;
	}
	return kind;
}

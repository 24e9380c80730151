/* Kept connections for adopted mounts (fuse_keep_adopt.h). */
#include "config.h"

#include "mount/fuse_keep_adopt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mount/mount_users.h"
#include "process/reader_process.h"
#include "mountinfo.h"
#include "mount/mount_devs.h"
#include "util/close_detached.h"
#include "util/log.h"
#include "util/mountinfo_kept.h"
#include "clock.h"

#define FDINFO_MAX 4096

static int copy_fd(int pidfd, int fd)
{
#ifdef SYS_pidfd_getfd
	return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

/* The FUSE connection number of the mount at mount_point in squashd's
 * mountinfo text: the minor of its device (major 0); -1 when it is no
 * such mount. */
static long mount_connection(const char *mountinfo, const char *mount_point)
{
	struct mount_identity id;
	unsigned major, minor;

	if (!mountinfo)
		return -1;
	mount_users_identity(mountinfo, mount_point, &id);
	if (sscanf(id.dev, "%u:%u", &major, &minor) != 2 || major != 0)
		return -1;
	return minor;
}

/* The connection number the kernel gives for our descriptor fd of
 * /dev/fuse; -1 when it gives none (older kernels, or not attached). */
static long fd_connection(int fd)
{
	char path[64], *info, *field;
	unsigned long conn;
	long r = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	info = mount_users_read_file(path, FDINFO_MAX);
	field = info ? strstr(info, "\nfuse_connection:") : NULL;
	if (field && sscanf(field + strlen("\nfuse_connection:"), "%lu", &conn) == 1)
		r = (long)conn;
	free(info);
	return r;
}

/* Our copy is the image: device and inode from the kernel's inode, never
 * from the file system's server (AT_STATX_DONT_SYNC: a FUSE file answers
 * from its cache, even when its server is stopped). */
static bool is_image(int fd, dev_t dev, ino_t ino)
{
	struct statx stx;

	return statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, &stx) == 0 &&
	       S_ISREG(stx.stx_mode) && makedev(stx.stx_dev_major, stx.stx_dev_minor) == dev &&
	       stx.stx_ino == ino;
}

/* The number on the line "name:" of fdinfo text, or -1. */
static long long fdinfo_field(const char *info, const char *name)
{
	size_t len = strlen(name);
	unsigned long long v;

	for (const char *line = info; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (!strncmp(line, name, len) && line[len] == ':')
			return sscanf(line + len + 1, "%llu", &v) == 1 ? (long long)v : -1;
	return -1;
}

/* Gives our copy of a descriptor the reader holds of file (ino, dev) to
 * every image slot of that file still empty; closes it when none takes
 * it (or it is not that file after all). */
static void place_image(uid_t owner, int copy, ino_t ino, dev_t dev, const struct kept_image *images,
			int *image_fds, size_t n, size_t *found)
{
	int held = copy;

	for (size_t i = 0; i < n && held >= 0; i++) {
		if (image_fds[i] >= 0 || images[i].ino != ino || images[i].dev != dev)
			continue;
		if (!is_image(held, dev, ino))
			break;
		image_fds[i] = held;
		(*found)++;
		held = -1;
		/* The same image twice in a union: another descriptor of it. */
		for (size_t k = i + 1; k < n; k++)
			if (image_fds[k] < 0 && images[k].ino == ino && images[k].dev == dev &&
			    (image_fds[k] = fcntl(image_fds[i], F_DUPFD_CLOEXEC, 0)) >= 0)
				(*found)++;
	}
	if (held >= 0)
		close_detached(owner, held);
}

/* What the kernel says of one descriptor of a reader. */
struct reader_fd {
	int fd;
	bool fuse;       /* /dev/fuse */
	long conn;       /* its connection (fuse), -1 when the kernel does not say */
	dev_t dev;       /* a file's device and inode (not fuse) */
	ino_t ino;
};

/* A reader's descriptors, walked once per adoption. */
struct reader_fds {
	pid_t pid;
	struct reader_fd *e;
	size_t n;
	bool cut; /* not all looked at: past a budget below */
	struct reader_fds *next;
};

/* What an adoption walks at most. A restart adopts before it serves anyone,
 * holding ds->lock, and the readers are their users': one may hold 65,536
 * descriptors (ptrace and dup), there may be one per mount (a reader that
 * answered badly is retired, not ended), and each descriptor's fdinfo
 * walks every lock on its file (anyone may lock /dev/fuse). So each user's
 * readers get a share of descriptors and time, and all readers together a
 * time: past them, the remaining mounts are adopted without a kept
 * connection, as on kernels that cannot tell, and their readers serve on.
 * An honest reader holds a /dev/fuse descriptor per mount and one per
 * image: far below the share. */
#define ADOPT_FDS_PER_USER 32768
#define ADOPT_MS_PER_USER 1000
#define ADOPT_MS_TOTAL 5000

struct user_walk {
	uid_t uid;
	size_t fds;
	long long ms;
	bool said;
};

struct fuse_keep_adoption {
	char *mountinfo; /* squashd's own, its lines below its mount directory */
	struct reader_fds *readers;
	struct user_walk *users;
	size_t nusers, users_room;
	long long ms; /* every walk so far */
	bool said;
	/* Every mount's device in squashd's namespace, read once for all the
	 * readers there (they all are, unless a user moved theirs). */
	struct mount_dev *own_devs;
	size_t own_ndevs;
	bool own_devs_read;
};



/* Walks the reader's descriptors once. The reader is the user's: they may
 * have stopped it, ptraced it, left open files of their own FUSE mounts
 * in it, and squashd holds ds->lock here. So no descriptor of it is ever
 * stat'ed, opened or followed: each is told by what the kernel says
 * without asking its file system, the magic link's name (readlink) and its
 * fdinfo (/dev/fuse names its connection; a file its inode and mount); a
 * descriptor that matches is copied (pidfd_getfd) and checked again on our
 * copy later (take_descriptors). */
/* uid's share of the adoption's walks; NULL when out of memory. */
static struct user_walk *user_walk_of(struct fuse_keep_adoption *a, uid_t uid)
{
	for (size_t i = 0; i < a->nusers; i++)
		if (a->users[i].uid == uid)
			return &a->users[i];
	if (a->nusers == a->users_room) {
		size_t more = a->users_room ? a->users_room * 2 : 16;
		struct user_walk *grown = realloc(a->users, more * sizeof(*grown));

		if (!grown)
			return NULL;
		a->users = grown;
		a->users_room = more;
	}
	a->users[a->nusers] = (struct user_walk){ .uid = uid };
	return &a->users[a->nusers++];
}

/* Whether u (and everyone) may still walk, started at start (ms). */
static bool within_budget(struct fuse_keep_adoption *a, struct user_walk *u, long long start)
{
	long long spent = squash_now_ms() - start;

	return u->fds < ADOPT_FDS_PER_USER && u->ms + spent < ADOPT_MS_PER_USER && a->ms + spent < ADOPT_MS_TOTAL;
}

/* Says once per user, and once for all, that a budget ended a walk. */
static void say_cut(struct fuse_keep_adoption *a, struct user_walk *u)
{
	if (a->ms >= ADOPT_MS_TOTAL) {
		if (!a->said)
			log_warning("adopting kept FUSE connections: the readers' descriptors took %d ms to "
				    "look at; the remaining mounts are adopted without one (their readers "
				    "serve on; a reader that ends now ends its mounts)", ADOPT_MS_TOTAL);
		a->said = true;
	} else if (!u->said) {
		log_peer_warning(u->uid, "adopting kept FUSE connections: uid %u's readers hold more "
				 "descriptors than %d or took more than %d ms to look at; that user's "
				 "remaining mounts are adopted without one", (unsigned)u->uid,
				 ADOPT_FDS_PER_USER, ADOPT_MS_PER_USER);
	}
	u->said = true;
}

static struct reader_fds *walk_reader(struct fuse_keep_adoption *a, pid_t pid, uid_t uid)
{
	char dir_path[64];
	struct reader_fds *r = calloc(1, sizeof(*r));
	struct user_walk *u = user_walk_of(a, uid);
	struct mount_dev *devs, *own = NULL;
	size_t ndevs, room = 0;
	long long start = squash_now_ms();
	DIR *dir;

	if (!r || !u) {
		free(r);
		return NULL;
	}
	r->pid = pid;
	if (!within_budget(a, u, start)) {
		r->cut = true;
		say_cut(a, u);
		return r;
	}
	if (reader_process_in_own_mount_ns(pid)) {
		if (!a->own_devs_read) {
			bool late;

			/* squashd's own table, read once for everyone: users'
			 * own mounts in it are fusermount's, at most mount_max. */
			a->own_devs = mount_devs("/proc/self/mountinfo", &a->own_ndevs, LLONG_MAX, &late);
			a->own_devs_read = true;
		}
		devs = a->own_devs;
		ndevs = a->own_ndevs;
	} else {
		long long left = ADOPT_MS_PER_USER - u->ms;
		bool late;

		if (ADOPT_MS_TOTAL - a->ms < left)
			left = ADOPT_MS_TOTAL - a->ms;
		snprintf(dir_path, sizeof(dir_path), "/proc/%d/mountinfo", (int)pid);
		devs = own = mount_devs(dir_path, &ndevs, start + left, &late);
		r->cut = late; /* the budget is spent: no descriptor is looked at */
	}
	snprintf(dir_path, sizeof(dir_path), "/proc/%d/fd", (int)pid);
	dir = r->cut ? NULL : opendir(dir_path);
	for (struct dirent *de; dir && (de = readdir(dir));) {
		char path[96], target[64], *end, *info;
		long fd = strtol(de->d_name, &end, 10);
		ssize_t len;

		if (de->d_name[0] == '.' || *end || fd < 0 || fd > INT32_MAX)
			continue;
		if (!within_budget(a, u, start)) {
			r->cut = true;
			break;
		}
		u->fds++;
		snprintf(path, sizeof(path), "%s/%ld", dir_path, fd);
		len = readlink(path, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = '\0';
		/* Sockets, pipes, anon inodes: none is ours, and an epoll's
		 * fdinfo waits for a lock its owner may hold. */
		if (target[0] != '/')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%ld", (int)pid, fd);
		info = mount_users_read_file(path, FDINFO_MAX);
		struct reader_fd e = { .fd = (int)fd, .fuse = !strcmp(target, "/dev/fuse"), .conn = -1 };
		if (e.fuse) {
			e.conn = (long)fdinfo_field(info, "fuse_connection");
		} else {
			long long ino = fdinfo_field(info, "ino"), mnt_id = fdinfo_field(info, "mnt_id");

			e.dev = ino >= 0 && mnt_id >= 0 ? mount_dev(devs, ndevs, (unsigned long)mnt_id) : 0;
			e.ino = (ino_t)ino;
		}
		free(info);
		if (e.fuse ? e.conn < 0 : e.dev == 0)
			continue;
		if (r->n == room) {
			size_t more = room ? room * 2 : 64;
			struct reader_fd *grown = realloc(r->e, more * sizeof(*grown));

			if (!grown)
				break;
			r->e = grown;
			room = more;
		}
		r->e[r->n++] = e;
	}
	if (dir)
		closedir(dir);
	long long spent = squash_now_ms() - start;
	u->ms += spent;
	a->ms += spent;
	if (r->cut)
		say_cut(a, u);
	free(own);
	return r;
}

static struct reader_fds *reader_of(struct fuse_keep_adoption *a, pid_t pid, uid_t uid)
{
	struct reader_fds *r;

	for (r = a->readers; r; r = r->next)
		if (r->pid == pid)
			return r;
	if ((r = walk_reader(a, pid, uid))) {
		r->next = a->readers;
		a->readers = r;
	}
	return r;
}

/* Copies from the reader the connection's descriptor and the n images'
 * (our copies in *conn_fd and image_fds; -1 when not found). */
static void take_descriptors(uid_t owner, int pidfd, const struct reader_fds *r, long conn,
			     const struct kept_image *images, size_t n, int *conn_fd, int *image_fds)
{
	size_t found = 0;

	for (size_t k = 0; k < r->n && (*conn_fd < 0 || found < n); k++) {
		const struct reader_fd *e = &r->e[k];
		bool wanted = e->fuse ? *conn_fd < 0 && e->conn == conn : false;

		for (size_t i = 0; !e->fuse && i < n && !wanted; i++)
			wanted = image_fds[i] < 0 && images[i].ino == e->ino && images[i].dev == e->dev;
		if (!wanted)
			continue;
		int copy = copy_fd(pidfd, e->fd);
		if (copy < 0)
			continue;
		if (!e->fuse)
			place_image(owner, copy, e->ino, e->dev, images, image_fds, n, &found);
		else if (fd_connection(copy) == conn)
			*conn_fd = copy;
		else
			close(copy); /* /dev/fuse: no flush */
	}
}

struct fuse_keep_adoption *fuse_keep_adoption_begin(const char *mount_dir)
{
	struct fuse_keep_adoption *a = calloc(1, sizeof(*a));

	if (a)
		a->mountinfo = mountinfo_kept("/proc/self/mountinfo", mountinfo_below, (void *)mount_dir);
	return a;
}

void fuse_keep_adoption_end(struct fuse_keep_adoption *a)
{
	if (!a)
		return;
	for (struct reader_fds *r = a->readers, *next; r; r = next) {
		next = r->next;
		free(r->e);
		free(r);
	}
	free(a->mountinfo);
	free(a->own_devs);
	free(a->users);
	free(a);
}

struct fuse_keep *fuse_keep_adopt(struct fuse_keep_adoption *a, int server_pidfd, pid_t server_pid,
				  const char *mount_point, const struct kept_image *images, size_t n,
				  const struct identity *owner, char *err, size_t errlen)
{
	long conn = mount_connection(a ? a->mountinfo : NULL, mount_point);
	int conn_fd = -1, *image_fds = malloc((n ? n : 1) * sizeof(*image_fds));
	struct reader_fds *r = NULL;
	struct fuse_keep *k = NULL;
	size_t missing = 0;

	if (!image_fds || !a) {
		snprintf(err, errlen, "out of memory");
		free(image_fds);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		image_fds[i] = -1;
	if (conn < 0) {
		snprintf(err, errlen, "%s is not a FUSE mount in squashd's namespace", mount_point);
		goto out;
	}
	if (!(r = reader_of(a, server_pid, owner->uid))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	take_descriptors(owner->uid, server_pidfd, r, conn, images, n, &conn_fd, image_fds);
	for (size_t i = 0; i < n; i++)
		missing += image_fds[i] < 0;
	if (conn_fd < 0 || missing || n == 0) {
		if (r->cut)
			snprintf(err, errlen, "%s of FUSE connection %ld not looked for in reader pid %d: "
				 "the adoption's budget for looking at readers' descriptors was spent",
				 conn_fd < 0 ? "the descriptor" : n > 1 ? "an image of the union" : "the image",
				 conn, (int)server_pid);
		else
			snprintf(err, errlen, "%s of FUSE connection %ld not found in reader pid %d "
				 "(kernels before about 6.16 do not name a descriptor's connection)",
				 conn_fd < 0 ? "the descriptor" : n > 1 ? "an image of the union" : "the image",
				 conn, (int)server_pid);
		if (conn_fd >= 0)
			close(conn_fd); /* /dev/fuse: no flush */
		goto out;
	}
	k = fuse_keep_new(conn_fd, image_fds, n, owner);
	if (!k)
		snprintf(err, errlen, "out of memory");
out:
	/* The keep holds duplicates. */
	for (size_t i = 0; i < n; i++)
		if (image_fds[i] >= 0)
			close_detached(owner->uid, image_fds[i]);
	free(image_fds);
	return k;
}

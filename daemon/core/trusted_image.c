#include "config.h"

#include "core/trusted_image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/xattr.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "settings/fs_types.h"
#include "user_fuse.h"
#include "util/file_identity.h"
#include "util/log.h"
#include "target.h"

/* Writable by someone other than root: whoever that is could swap the
 * image the kernel is about to parse. */
static bool root_controlled(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* One component below dirfd, never through a link of any kind. */
static int open_component(int dirfd, const char *name, int flags)
{
	struct open_how how = {
		.flags = (unsigned)(flags | O_NOFOLLOW | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));

	if (fd < 0 && errno == ENOSYS) /* before Linux 5.6: O_NOFOLLOW on one component */
		fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
	return fd;
}

static bool hardlinks_protected = true; /* set once at start */

void trusted_image_init(void)
{
	char buf[8] = "";
	FILE *f = fopen("/proc/sys/fs/protected_hardlinks", "re");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	hardlinks_protected = buf[0] == '1';
	if (!hardlinks_protected)
		log_warning("fs.protected_hardlinks is not 1: users can link root's files into directories "
			    "they write; trusted images are then never reached through sticky directories "
			    "(set it to 1, as every distribution does by default)");
}

/* True when dir lies strictly above one of the prefixes. */
static bool above_a_prefix(const struct squash_prefixes *p, const char *dir)
{
	size_t n = strlen(dir);

	for (size_t i = 0; i < p->count; i++)
		if (!strncmp(p->items[i], dir, n) && p->items[i][n] == '/')
			return true;
	return false;
}

/* Whether the walk may go on into the mount fd is on: one that
 * squashd's mountinfo lists and that no FUSE server answers for, decided
 * from the mount id and mountinfo (the kernel writes both without asking
 * any file system), before anything is looked up below it. */
static bool mount_walkable(const struct file_identity *fid, const char *name, char *why, size_t whylen)
{
	char reason[1024];

	if (!fid->has_mnt_id) {
		snprintf(why, whylen, "the kernel gives no mount id (statx, Linux 5.8 and later)");
		return false;
	}
	/* The mount, and every mount an overlay on the way stacks on. */
	if (squash_mount_reaches_fuse(fid->mnt_id, reason, sizeof(reason))) {
		snprintf(why, whylen, "%s %s", name, reason);
		return false;
	}
	return true;
}

/* Walks path from "/" as root in squashd's own mount namespace; returns a
 * read-only descriptor of the root-controlled regular file it names, or -1
 * with why. Every component is opened O_PATH and its attributes come from
 * the inode cache; each mount met is checked in mountinfo before anything
 * below it is looked up, so a FUSE server is never asked; only the file
 * itself, on an allowed mount, is reopened for reading. */
static int walk_as_root(const struct squash_prefixes *prefixes, const char *path, char *why, size_t whylen)
{
	char buf[PATH_MAX], walked[PATH_MAX] = "", *save = NULL;
	struct file_identity fid;
	struct stat st;
	int dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (dirfd < 0 || file_identity_of(dirfd, &fid, &st) < 0 || !root_controlled(&st)) {
		snprintf(why, whylen, "/ is not root-controlled");
		goto fail;
	}
	if (!mount_walkable(&fid, "/", why, whylen))
		goto fail;
	uint64_t mnt_id = fid.mnt_id;
	snprintf(buf, sizeof(buf), "%s", path);
	char *name = strtok_r(buf, "/", &save);
	while (name) {
		char *next = strtok_r(NULL, "/", &save);
		int fd;

		if (!strcmp(name, ".") || !strcmp(name, "..")) {
			snprintf(why, whylen, "'%s' in the path", name);
			goto fail;
		}
		fd = open_component(dirfd, name, O_PATH);
		if (fd < 0 && errno == ELOOP) {
			snprintf(why, whylen, "%s: a symbolic link on the way (squashd follows none)", name);
			goto fail;
		}
		if (fd < 0) {
			snprintf(why, whylen, "%s: %s", name, strerror(errno));
			goto fail;
		}
		close(dirfd);
		dirfd = fd;
		if (file_identity_of(fd, &fid, &st) < 0) {
			snprintf(why, whylen, "%s: statx: %s", name, strerror(errno));
			goto fail;
		}
		if (S_ISLNK(st.st_mode)) {
			snprintf(why, whylen, "%s: a symbolic link on the way (squashd follows none)", name);
			goto fail;
		}
		if (fid.mnt_id != mnt_id) {
			if (!mount_walkable(&fid, name, why, whylen))
				goto fail;
			mnt_id = fid.mnt_id;
		}
		size_t w = strlen(walked);
		snprintf(walked + w, sizeof(walked) - w, "/%s", name);
		if (next) {
			/* In a sticky directory (/tmp) others cannot rename root's
			 * entries; but they can make their own, and mount on them
			 * (user_allow_other): so only above a prefix, where the
			 * walk continues into a root-controlled entry. */
			bool sticky_ok = (st.st_mode & S_ISVTX) && st.st_uid == 0 && hardlinks_protected &&
					 above_a_prefix(prefixes, walked);

			if (!S_ISDIR(st.st_mode) || (!root_controlled(&st) && !sticky_ok)) {
				snprintf(why, whylen, "directory %s is not root-controlled (owner uid %u, mode %04o)",
					 name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
				goto fail;
			}
		} else if (!S_ISREG(st.st_mode) || !root_controlled(&st)) {
			snprintf(why, whylen, "the file is not root-controlled (owner uid %u, mode %04o)",
				 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
			goto fail;
		}
		name = next;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "not a file");
		goto fail;
	}
	/* The very object walked to, now opened for reading. */
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", dirfd);
	int fd = open(self, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "reopening it for reading: %s", strerror(errno));
		goto fail;
	}
	close(dirfd);
	return fd;
fail:
	if (dirfd >= 0)
		close(dirfd);
	return -1;
}

/* ACLs can grant write that the mode bits do not show. */
static const char *acl_xattr(int fd)
{
	static const char *const names[] = { "system.posix_acl_access", "system.nfs4_acl", "system.richacl" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (fgetxattr(fd, names[i], NULL, 0) >= 0 || (errno != ENODATA && errno != ENOTSUP))
			return names[i];
	return NULL;
}

/* Whether anyone has the file open for writing now (a former owner who
 * kept a descriptor across chown and mv, say): then no read lease can be
 * taken. Taken on root's own read-only descriptor and released at once;
 * a break meanwhile signals SIGURG, which squashd ignores, not SIGIO,
 * which would end it. A file system without leases cannot tell: refused
 * as well. Returns 0, or an errno. */
static int open_for_writing(int fd)
{
	if (fcntl(fd, F_SETSIG, SIGURG) < 0)
		return errno;
	if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
		return errno;
	fcntl(fd, F_SETLEASE, F_UNLCK);
	return 0;
}

int trusted_image_open(const struct squashd_config *cfg, int user_fd, char *why, size_t whylen)
{
	struct file_identity user, root;
	char link[64], path[PATH_MAX], reason[PATH_MAX + 128];
	struct statfs sfs;
	const char *fs_name = NULL;
	ssize_t n;
	int fd;

	why[0] = '\0';
	/* The candidate's name: where the user's descriptor points, as the
	 * user's namespace names it (readlink asks no file system). A name
	 * only proposes; the objects decide below. */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", user_fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(path) - 1)
		return -1;
	path[n] = '\0';
	if (path[0] != '/' || !squash_prefixes_contain(&cfg->trusted_prefixes, path))
		return -1; /* not a candidate: no reason worth logging */

	if (file_identity_of(user_fd, &user, NULL) < 0 || !user.has_mnt_id) {
		snprintf(why, whylen, "the kernel gives no mount id (statx, Linux 5.8 and later)");
		return -1;
	}
	fd = walk_as_root(&cfg->trusted_prefixes, path, reason, sizeof(reason));
	if (fd < 0) {
		snprintf(why, whylen, "squashd cannot reach %s itself as a trusted file: %s", path, reason);
		return -1;
	}
	if (file_identity_of(fd, &root, NULL) < 0 || !file_identity_same(&user, &root)) {
		snprintf(why, whylen,
			 "%s in squashd's mount namespace is not the file the user opened (another mount namespace, a bind mount, or a replaced file)",
			 path);
		close(fd);
		return -1;
	}
	if (fstatfs(fd, &sfs) < 0 || !fs_types_allows(cfg->kernel_fs_types, (long)sfs.f_type, &fs_name)) {
		snprintf(why, whylen, "%s is on a %s file system, not one of kernel_fs_types", path,
			 fs_name ? fs_name : "unknown");
		close(fd);
		return -1;
	}
	const char *acl = acl_xattr(fd);
	if (acl) {
		snprintf(why, whylen, "%s carries an ACL (%s), which may grant write the mode does not show", path,
			 acl);
		close(fd);
		return -1;
	}
	int e = open_for_writing(fd);
	if (e) {
		snprintf(why, whylen, "%s %s", path,
			 e == EAGAIN || e == EBUSY ? "is open for writing somewhere (no read lease can be taken)"
						   : "cannot be checked for writers (no read lease: its file system "
						     "gives none)");
		close(fd);
		return -1;
	}
	return fd;
}

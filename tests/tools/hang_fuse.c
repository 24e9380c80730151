/* hang_fuse: a read-only FUSE passthrough of a small directory tree that
 * never answers one kind of request, standing in for a FUSE server that
 * hangs (the hang matrix, tests/integration/test_one_users_hang_never_
 * delays_another.py). Low-level libfuse3 API: a hung request is kept,
 * never replied to, and the loop serves the others on.
 *
 *   hang_fuse SOURCE MOUNTPOINT [--hang OP] [--uid UID|any] [-o OPTS]
 *
 * OP: lookup, getattr, open, read, flush, release, statfs, readdir,
 * getxattr, or none (the default). Only requests from UID (default 0,
 * root) hang; "any" hangs everyone's. Mounted with allow_other (so run it
 * as root: the mount's user_id is then 0, as for a site's file system)
 * and with every entry and attribute timeout 0, so that each access asks
 * the server. To stop it entirely, send it SIGSTOP. SIGTERM unmounts.
 * Prints "ready" on stdout once mounted.
 *
 * A test tool (noinst), not part of the product. */
#define FUSE_USE_VERSION 34
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

enum op { OP_NONE, OP_LOOKUP, OP_GETATTR, OP_OPEN, OP_READ, OP_FLUSH, OP_RELEASE, OP_STATFS,
	  OP_READDIR, OP_GETXATTR };
static const char *const op_names[] = { "none", "lookup", "getattr", "open", "read", "flush",
					"release", "statfs", "readdir", "getxattr" };

static enum op hang_op = OP_NONE;
static long hang_uid = 0; /* -1: anyone */
static int source_fd = -1;

/* Node ids: index + 1 into paths (relative to SOURCE; "." is the root).
 * The tree is tiny and entries are never forgotten. */
static char **paths;
static size_t n_paths, cap_paths;

/* The requests never answered (kept, as a hung server keeps them). */
static fuse_req_t *kept;
static size_t n_kept, cap_kept;

static bool hang(enum op op, fuse_req_t req)
{
	if (op != hang_op || (hang_uid >= 0 && (long)fuse_req_ctx(req)->uid != hang_uid))
		return false;
	if (n_kept == cap_kept) {
		size_t cap = cap_kept ? 2 * cap_kept : 64;
		fuse_req_t *k = realloc(kept, cap * sizeof(*k));
		if (!k)
			return false; /* answer it after all */
		kept = k;
		cap_kept = cap;
	}
	kept[n_kept++] = req;
	return true;
}

static const char *path_of(fuse_ino_t ino)
{
	return ino >= 1 && ino <= n_paths ? paths[ino - 1] : NULL;
}

static fuse_ino_t node_of(const char *path)
{
	for (size_t i = 0; i < n_paths; i++)
		if (!strcmp(paths[i], path))
			return i + 1;
	if (n_paths == cap_paths) {
		size_t cap = cap_paths ? 2 * cap_paths : 64;
		char **p = realloc(paths, cap * sizeof(*p));
		if (!p)
			return 0;
		paths = p;
		cap_paths = cap;
	}
	if (!(paths[n_paths] = strdup(path)))
		return 0;
	return ++n_paths;
}

static int stat_of(fuse_ino_t ino, struct stat *st)
{
	const char *p = path_of(ino);

	if (!p)
		return ENOENT;
	if (fstatat(source_fd, p, st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno;
	st->st_ino = ino;
	return 0;
}

static void hf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { 0 };
	const char *dir = path_of(parent);
	char path[PATH_MAX];
	int err;

	if (hang(OP_LOOKUP, req))
		return;
	if (!dir || snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		fuse_reply_err(req, dir ? ENAMETOOLONG : ENOENT);
		return;
	}
	e.ino = node_of(path);
	if (!e.ino) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if ((err = stat_of(e.ino, &e.attr))) {
		fuse_reply_err(req, err);
		return;
	}
	fuse_reply_entry(req, &e);
}

static void hf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err;

	(void)fi;
	if (hang(OP_GETATTR, req))
		return;
	if ((err = stat_of(ino, &st)))
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, 0);
}

static void hf_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX];
	const char *p = path_of(ino);
	ssize_t n = p ? readlinkat(source_fd, p, buf, sizeof(buf) - 1) : -1;

	if (n < 0) {
		fuse_reply_err(req, p ? errno : ENOENT);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

static void hf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const char *p = path_of(ino);
	int fd;

	if (hang(OP_OPEN, req))
		return;
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fd = p ? openat(source_fd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
	if (fd < 0) {
		fuse_reply_err(req, p ? errno : ENOENT);
		return;
	}
	fi->fh = (uint64_t)fd;
	if (fuse_reply_open(req, fi) != 0)
		close(fd);
}

static void hf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *buf;
	ssize_t n;

	(void)ino;
	if (hang(OP_READ, req))
		return;
	buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = pread((int)fi->fh, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void hf_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	if (!hang(OP_FLUSH, req))
		fuse_reply_err(req, 0);
}

static void hf_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	if (!hang(OP_RELEASE, req))
		fuse_reply_err(req, 0);
}

static void hf_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const char *p = path_of(ino);
	int fd = p ? openat(source_fd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		fuse_reply_err(req, p ? errno : ENOENT);
		if (fd >= 0)
			close(fd);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) != 0)
		closedir(d);
}

static void hf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	char *buf;
	size_t used = 0;

	(void)ino;
	if (hang(OP_READDIR, req))
		return;
	buf = calloc(1, size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	seekdir(d, off);
	for (struct dirent *de; (de = readdir(d));) {
		struct stat st = { .st_ino = de->d_ino, .st_mode = (mode_t)de->d_type << 12 };
		size_t len = fuse_add_direntry(req, buf + used, size - used, de->d_name, &st,
					       telldir(d));
		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void hf_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	closedir((DIR *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void hf_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	if (hang(OP_STATFS, req))
		return;
	if (fstatvfs(source_fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void hf_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	(void)ino;
	(void)name;
	(void)size;
	if (!hang(OP_GETXATTR, req))
		fuse_reply_err(req, ENODATA);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = hf_lookup,
	.getattr = hf_getattr,
	.readlink = hf_readlink,
	.open = hf_open,
	.read = hf_read,
	.flush = hf_flush,
	.release = hf_release,
	.opendir = hf_opendir,
	.readdir = hf_readdir,
	.releasedir = hf_releasedir,
	.statfs = hf_statfs,
	.getxattr = hf_getxattr,
};

static void usage(void)
{
	fprintf(stderr, "usage: hang_fuse SOURCE MOUNTPOINT [--hang OP] [--uid UID|any] [-o OPTS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *source = NULL, *mountpoint = NULL, *extra = NULL;
	char opts[1024];
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--hang") && i + 1 < argc) {
			size_t k = 0;
			while (k < sizeof(op_names) / sizeof(op_names[0]) && strcmp(op_names[k], argv[i + 1]))
				k++;
			if (k == sizeof(op_names) / sizeof(op_names[0]))
				usage();
			hang_op = (enum op)k;
			i++;
		} else if (!strcmp(argv[i], "--uid") && i + 1 < argc) {
			hang_uid = !strcmp(argv[++i], "any") ? -1 : strtol(argv[i], NULL, 10);
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			extra = argv[++i];
		} else if (!source) {
			source = argv[i];
		} else if (!mountpoint) {
			mountpoint = argv[i];
		} else {
			usage();
		}
	}
	if (!source || !mountpoint)
		usage();
	source_fd = open(source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (source_fd < 0 || node_of(".") != FUSE_ROOT_ID) {
		perror(source);
		return 1;
	}
	snprintf(opts, sizeof(opts), "allow_other,default_permissions,ro,fsname=hang_fuse,subtype=hang%s%s",
		 extra ? "," : "", extra ? extra : "");
	char *fargv[] = { argv[0], "-o", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);

	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) == 0) {
		if (fuse_session_mount(se, mountpoint) == 0) {
			printf("ready\n");
			fflush(stdout);
			rc = fuse_session_loop(se) ? 1 : 0;
			fuse_session_unmount(se);
		}
		fuse_remove_signal_handlers(se);
	}
	fuse_session_destroy(se);
	/* The kept requests die with the connection. */
	free(kept);
	return rc;
}

#include "config.h"

#include "reader/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* "For ever": the image never changes while mounted. The kernel clamps
 * what it cannot represent. */
#define FOREVER (100.0 * 365 * 24 * 3600)

static struct reader *rd_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* FUSE node ids: 1 is the root; any other inode is its reference + 2
 * (references are 48 bits and 0 and 1 are taken), so no table of
 * looked-up inodes is needed and FORGET has nothing to do. */
static uint64_t node_of(const struct image *img, uint64_t id)
{
	return id == image_root(img) ? FUSE_ROOT_ID : id + 2;
}

static int inode_of_node(struct image *img, fuse_ino_t node, struct inode *in)
{
	if (node == FUSE_ROOT_ID)
		return inode_get(img, image_root(img), in);
	if (node < 2)
		return -EIO;
	return inode_get(img, node - 2, in);
}

static void entry_of(const struct image *img, const struct inode *in, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = node_of(img, in->id);
	e->attr_timeout = FOREVER;
	e->entry_timeout = FOREVER;
	inode_stat(in, &e->attr);
}

void unlinked_entry(uint64_t ino, mode_t type, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr.st_ino = (ino_t)ino;
	e->attr.st_mode = type;
}

void reader_negotiate(struct reader *rd, struct fuse_conn_info *conn)
{
	unsigned want = FUSE_CAP_READDIRPLUS | FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_ASYNC_READ |
			FUSE_CAP_CACHE_SYMLINKS;

	conn->want |= want & conn->capable;
	/* Always READDIRPLUS: attributes come with the listing at no cost. */
	conn->want &= ~(unsigned)(FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_SPLICE_READ |
				  FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
				  FUSE_CAP_AUTO_INVAL_DATA);
	rd->no_open = conn->capable & FUSE_CAP_NO_OPEN_SUPPORT;
	rd->no_opendir = conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	reader_negotiate(userdata, conn);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct image *img = rd_of(req)->img;
	struct fuse_entry_param e;
	struct inode dir, in;
	uint64_t id;
	int r = inode_of_node(img, parent, &dir);

	if (r == 0)
		r = dir_lookup(img, &dir, name, &id);
	if (r == -ENOENT) {
		/* Negative entries are cached for ever too: python's import
		 * probes many names that are not there. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = FOREVER;
		fuse_reply_entry(req, &e);
		return;
	}
	if (r == 0)
		r = inode_get(img, id, &in);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (!S_ISDIR(in.mode))
		plus_note_file_lookup(&rd_of(req)->plus, fuse_req_ctx(req)->pid);
	entry_of(img, &in, &e);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	struct inode in;
	struct stat st;
	int r = inode_of_node(rd_of(req)->img, node, &in);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	inode_stat(&in, &st);
	fuse_reply_attr(req, &st, FOREVER);
}

static void op_readlink(fuse_req_t req, fuse_ino_t node)
{
	struct image *img = rd_of(req)->img;
	char target[4096];
	struct inode in;
	int r = inode_of_node(img, node, &in);

	if (r == 0)
		r = inode_readlink(img, &in, target, sizeof(target));
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_readlink(req, target);
}

static void op_open(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* ENOSYS: the kernel stops sending OPEN (and RELEASE) for good and
	 * keeps the page cache across opens. */
	if (rd_of(req)->no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_opendir(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	if (rd_of(req)->no_opendir) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t node, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct image *img = rd_of(req)->img;
	struct read_reply r;
	struct inode in;
	int rc = inode_of_node(img, node, &in);

	if (rc == 0 && !S_ISREG(in.mode))
		rc = -EISDIR;
	if (rc == 0 && off < 0)
		rc = -EINVAL;
	if (rc == 0)
		rc = file_read(img, &in, (uint64_t)off, size, &r);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* Straight from the cached blocks: no copy into a reply buffer. */
	if (r.n)
		fuse_reply_iov(req, r.iov, r.n);
	else
		fuse_reply_buf(req, NULL, 0);
	read_reply_done(img, &r);
}

static void readdir_common(fuse_req_t req, fuse_ino_t node, size_t size, off_t off, bool plus)
{
	struct image *img = rd_of(req)->img;
	bool dirs_only = plus && !plus_links_files(&rd_of(req)->plus, fuse_req_ctx(req)->pid);
	struct inode dir;
	struct dir_iter it;
	struct dir_entry de;
	size_t used = 0;
	char *buf;
	int r = inode_of_node(img, node, &dir);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (!S_ISDIR(dir.mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (size > 1 << 20)
		size = 1 << 20;
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* "." and ".." (offsets 1 and 2): names only, the kernel resolves them. */
	for (off_t dot = off; dot < 2; dot++) {
		struct fuse_entry_param e;
		size_t n;

		memset(&e, 0, sizeof(e));
		e.attr.st_mode = S_IFDIR;
		e.attr.st_ino = dot == 0 ? dir.ino : dir.parent;
		n = plus ? fuse_add_direntry_plus(req, buf + used, size - used, dot ? ".." : ".", &e, dot + 1)
			 : fuse_add_direntry(req, buf + used, size - used, dot ? ".." : ".", &e.attr, dot + 1);
		if (n > size - used)
			goto reply;
		used += n;
	}
	r = dir_open(img, &dir, off > 2 ? (uint64_t)off : 0, &it);
	while (r == 0 && (r = dir_next(img, &it, &de)) > 0) {
		struct fuse_entry_param e;
		struct inode in;
		size_t n;

		if (plus) {
			/* Unlinked: not even its inode is read. */
			if (dirs_only && !S_ISDIR(dir_entry_mode(de.type))) {
				unlinked_entry(de.ino, dir_entry_mode(de.type), &e);
			} else {
				if ((r = inode_get(img, de.id, &in)) < 0)
					break;
				entry_of(img, &in, &e);
			}
			n = fuse_add_direntry_plus(req, buf + used, size - used, de.name, &e,
						   (off_t)de.cookie);
		} else {
			memset(&e, 0, sizeof(e));
			e.attr.st_ino = de.ino;
			e.attr.st_mode = dir_entry_mode(de.type);
			n = fuse_add_direntry(req, buf + used, size - used, de.name, &e.attr,
					      (off_t)de.cookie);
		}
		if (n > size - used)
			break; /* not sent: the next request starts with it */
		used += n;
		r = 0;
	}
	/* A damaged entry: what came before it is still answered; the next
	 * request starts at the damage and gets the error. */
	if (r < 0 && used == 0) {
		free(buf);
		fuse_reply_err(req, -r);
		return;
	}
reply:
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t node, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	readdir_common(req, node, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t node, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	readdir_common(req, node, size, off, true);
}

/* Values and lists are at most 64 KiB (XATTR_SIZE_MAX, XATTR_LIST_MAX):
 * the kernel never asks for more. size 0 asks for the length only. */
#define XATTR_REPLY_MAX 65536u

/* The inode of node, and a buffer for the answer (none for a size probe:
 * size 0). */
static int xattr_prepare(struct image *img, fuse_ino_t node, size_t *size, struct inode *in,
			 char **buf)
{
	int r = inode_of_node(img, node, in);

	*buf = NULL;
	if (*size > XATTR_REPLY_MAX)
		*size = XATTR_REPLY_MAX;
	if (r == 0 && *size > 0 && !(*buf = malloc(*size)))
		r = -ENOMEM;
	return r;
}

/* Answers with r (a length or -errno) and frees buf. */
static void reply_xattr(fuse_req_t req, int r, char *buf, size_t size)
{
	if (r < 0)
		fuse_reply_err(req, -r);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t node, const char *name, size_t size)
{
	struct image *img = rd_of(req)->img;
	struct inode in;
	char *buf;
	int r = xattr_prepare(img, node, &size, &in, &buf);

	if (r == 0)
		r = xattr_get(img, &in, name, buf, size);
	reply_xattr(req, r, buf, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t node, size_t size)
{
	struct image *img = rd_of(req)->img;
	struct inode in;
	char *buf;
	int r = xattr_prepare(img, node, &size, &in, &buf);

	/* The kernel's squashfs lists trusted.* to CAP_SYS_ADMIN only; the
	 * reader sees the caller's uid, root's the nearest. */
	if (r == 0)
		r = xattr_list(img, &in, fuse_req_ctx(req)->uid == 0, buf, size);
	reply_xattr(req, r, buf, size);
}

static void op_statfs(fuse_req_t req, fuse_ino_t node)
{
	struct statvfs st;

	image_statfs(rd_of(req)->img, &st);
	fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops reader_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.open = op_open,
	.read = op_read,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};

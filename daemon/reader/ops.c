/* squash-reader's FUSE requests (ops.h), answered once for every kind of
 * tree a mount serves (tree.h): one image or a union of images. */
#include "config.h"

#include "reader/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "reader/neighbour_push.h"
#include "reader/stored_files.h"
#include "reader/tree.h"

/* "For ever": the image never changes while mounted. The kernel clamps
 * what it cannot represent. */
#define FOREVER (100.0 * 365 * 24 * 3600)

static struct reader *rd_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* What a mount serves never changes, so this branch always goes the same
 * way (one image as fast as with operations of its own: docs/performance.md
 * section 9). */
static const struct tree_kind *kind_of(const struct reader *rd)
{
	return rd->u ? &union_tree : &image_tree;
}

static void entry_of(const struct tree_kind *kind, uint64_t node, const struct tree_node *n,
		     struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = node;
	e->attr_timeout = FOREVER;
	e->entry_timeout = FOREVER;
	kind->stat(n, &e->attr);
}

/* An entry of a READDIRPLUS answer the kernel does not link: node id 0
 * (fuse_direntplus_link skips it: no inode, no dentry, no lookup counted,
 * so no FORGET either), its number and type for the listing only. A stat
 * of it then costs a LOOKUP; a walk that only needs names and types (find
 * without -printf) skips an inode and a dentry per file. */
static void unlinked_entry(uint64_t ino, mode_t type, struct fuse_entry_param *e)
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
	struct reader *rd = rd_of(req);
	const struct tree_kind *kind = kind_of(rd);
	struct fuse_entry_param e;
	struct tree_node n;
	uint64_t node;
	int r = kind->lookup(rd, parent, name, &node, &n);

	if (r == -ENOENT) {
		/* Negative entries are cached for ever too: python's import
		 * probes many names that are not there. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = FOREVER;
		fuse_reply_entry(req, &e);
		return;
	}
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (!S_ISDIR(n.in.mode))
		plus_note_file_lookup(&rd->plus, fuse_req_ctx(req)->pid);
	entry_of(kind, node, &n, &e);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	struct reader *rd = rd_of(req);
	const struct tree_kind *kind = kind_of(rd);
	struct tree_node n;
	struct stat st;
	int r = kind->node_get(rd, node, &n);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	kind->stat(&n, &st);
	fuse_reply_attr(req, &st, FOREVER);
}

static void op_readlink(fuse_req_t req, fuse_ino_t node)
{
	struct reader *rd = rd_of(req);
	char target[4096];
	struct tree_node n;
	int r = kind_of(rd)->node_get(rd, node, &n);

	if (r == 0)
		r = inode_readlink(n.img, &n.in, target, sizeof(target));
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
	struct reader *rd = rd_of(req);
	struct read_reply r;
	struct tree_node n;
	int rc = kind_of(rd)->node_get(rd, node, &n);

	if (rc == 0 && !S_ISREG(n.in.mode))
		rc = -EISDIR;
	if (rc == 0 && off < 0)
		rc = -EINVAL;
	if (rc == 0)
		rc = file_read(n.img, &n.in, (uint64_t)off, size, &r);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* Before the answer, while the client waits for it (neighbour_push.h).
	 * A union's files are not stored: their node ids are the union's. */
	if (off == 0 && rd->push && !rd->u) {
		stored_note_read(n.img, &n.in, (uint64_t)off, size);
		neighbour_push(rd->se, n.img, &n.in);
	}
	/* Straight from the cached blocks: no copy into a reply buffer. */
	if (r.n)
		fuse_reply_iov(req, r.iov, r.n);
	else
		fuse_reply_buf(req, NULL, 0);
	read_reply_done(n.img, &r);
	/* Answered: the client goes on while this thread works for its next
	 * reads. */
	image_work_ahead(n.img);
}

/* The first request of a file just opened, when the client is python
 * (neighbour_push.h, open_push): its bytes go to the page cache before
 * the answer, which is the one libfuse gives without an ioctl handler. */
static void op_ioctl(fuse_req_t req, fuse_ino_t node, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in, size_t in_size,
		     size_t out_size)
{
	struct reader *rd = rd_of(req);
	struct tree_node n;

	(void)cmd, (void)arg, (void)fi, (void)flags, (void)in, (void)in_size, (void)out_size;
	/* A union's files are not stored: their node ids are the union's. */
	bool pushing = rd->push && !rd->u && image_tree.node_get(rd, node, &n) == 0;

	if (pushing)
		open_push(rd->se, n.img, &n.in);
	fuse_reply_err(req, ENOSYS);
	/* Answered: the read-ahead of the image the store's read asked for. */
	if (pushing)
		image_work_ahead(n.img);
}

/* A listing's answer being filled. */
struct fill {
	fuse_req_t req;
	const struct tree_kind *kind;
	char *buf;
	size_t size, used;
	bool plus;
};

/* Adds one entry; 1 when it does not fit. */
static int fill_one(struct fill *f, const char *name, const struct fuse_entry_param *e, off_t next)
{
	size_t n = f->plus ? fuse_add_direntry_plus(f->req, f->buf + f->used, f->size - f->used, name, e, next)
			   : fuse_add_direntry(f->req, f->buf + f->used, f->size - f->used, name, &e->attr, next);

	if (n > f->size - f->used)
		return 1; /* not sent: the next request starts with it */
	f->used += n;
	return 0;
}

static int fill_entry(void *ctx, const struct tree_dirent *d)
{
	struct fill *f = ctx;
	struct fuse_entry_param e;

	if (f->plus && d->node) {
		entry_of(f->kind, d->node, &d->n, &e);
	} else {
		/* READDIR's name and type, or READDIRPLUS's unlinked entry. */
		unlinked_entry(d->ino, d->type, &e);
	}
	return fill_one(f, d->name, &e, (off_t)d->cookie);
}

static void readdir_common(fuse_req_t req, fuse_ino_t node, size_t size, off_t off, bool plus)
{
	struct reader *rd = rd_of(req);
	struct fill f = { .req = req, .kind = kind_of(rd), .plus = plus };
	struct tree_node dir;
	enum tree_plus what;
	int r = f.kind->node_get(rd, node, &dir);

	if (r == 0 && !S_ISDIR(dir.in.mode))
		r = -ENOTDIR;
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	f.size = size > 1 << 20 ? 1 << 20 : size;
	if (!(f.buf = malloc(f.size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* "." and ".." (offsets 1 and 2): names only, the kernel resolves them. */
	for (off_t dot = off; dot < 2; dot++) {
		struct fuse_entry_param e;
		struct stat st;

		memset(&e, 0, sizeof(e));
		e.attr.st_mode = S_IFDIR;
		if (dot == 0) {
			f.kind->stat(&dir, &st);
			e.attr.st_ino = st.st_ino;
		} else {
			e.attr.st_ino = (ino_t)f.kind->dotdot_ino(&dir);
		}
		if (fill_one(&f, dot ? ".." : ".", &e, dot + 1))
			goto reply;
	}
	what = !plus ? TREE_PLUS_NONE
	       : plus_links_files(&rd->plus, fuse_req_ctx(req)->pid) ? TREE_PLUS_ALL : TREE_PLUS_DIRS;
	r = f.kind->list(rd, &dir, off > 2 ? (uint64_t)off : 0, what, fill_entry, &f);
	/* A damaged entry: what came before it is still answered; the next
	 * request starts at the damage and gets the error. */
	if (r < 0 && f.used == 0) {
		free(f.buf);
		fuse_reply_err(req, -r);
		return;
	}
reply:
	fuse_reply_buf(req, f.buf, f.used);
	free(f.buf);
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

/* What node is, and a buffer for the answer (none for a size probe:
 * size 0). */
static int xattr_prepare(struct reader *rd, fuse_ino_t node, size_t *size, struct tree_node *n,
			 char **buf)
{
	int r = kind_of(rd)->node_get(rd, node, n);

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
	struct reader *rd = rd_of(req);
	struct tree_node n;
	char *buf;
	int r = xattr_prepare(rd, node, &size, &n, &buf);

	if (r == 0)
		r = kind_of(rd)->xattr_get(&n, name, buf, size);
	reply_xattr(req, r, buf, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t node, size_t size)
{
	struct reader *rd = rd_of(req);
	struct tree_node n;
	char *buf;
	int r = xattr_prepare(rd, node, &size, &n, &buf);

	/* The kernel's squashfs lists trusted.* to CAP_SYS_ADMIN only; the
	 * reader sees the caller's uid, root's the nearest. */
	if (r == 0)
		r = kind_of(rd)->xattr_list(&n, fuse_req_ctx(req)->uid == 0, buf, size);
	reply_xattr(req, r, buf, size);
}

static void op_statfs(fuse_req_t req, fuse_ino_t node)
{
	struct reader *rd = rd_of(req);
	struct statvfs st;

	kind_of(rd)->statfs(rd, &st);
	fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops reader_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.ioctl = op_ioctl,
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

/* squash-reader's answers to FUSE requests on a union of images
 * (union_tree.h): the same answers as ops.c gives for one image (every
 * entry, attribute, negative entry and link target cached for ever,
 * READDIRPLUS, zero-message opens), over the union's nodes. */
#include "config.h"

#include "reader/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "reader/union_tree.h"

#define FOREVER (100.0 * 365 * 24 * 3600)
#define XATTR_REPLY_MAX 65536u

static struct union_fs *u_of(fuse_req_t req)
{
	return ((struct reader *)fuse_req_userdata(req))->u;
}

static void entry_of(uint64_t node, const struct union_node *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = node;
	e->attr_timeout = FOREVER;
	e->entry_timeout = FOREVER;
	union_stat(n, &e->attr);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	reader_negotiate(userdata, conn);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct union_node n;
	uint64_t node;
	int r = union_lookup(u_of(req), parent, name, &node, &n);

	if (r == -ENOENT) {
		/* Cached for ever, as for one image. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = FOREVER;
		fuse_reply_entry(req, &e);
	} else if (r < 0) {
		fuse_reply_err(req, -r);
	} else {
		if (!S_ISDIR(n.in.mode))
			plus_note_file_lookup(&((struct reader *)fuse_req_userdata(req))->plus,
					      fuse_req_ctx(req)->pid);
		entry_of(node, &n, &e);
		fuse_reply_entry(req, &e);
	}
}

static void op_getattr(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	struct union_node n;
	struct stat st;
	int r = union_node_get(u_of(req), node, &n);

	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	union_stat(&n, &st);
	fuse_reply_attr(req, &st, FOREVER);
}

static void op_readlink(fuse_req_t req, fuse_ino_t node)
{
	struct union_fs *u = u_of(req);
	char target[4096];
	struct union_node n;
	int r = union_node_get(u, node, &n);

	if (r == 0)
		r = inode_readlink(union_image(u, n.layer), &n.in, target, sizeof(target));
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
	if (((struct reader *)fuse_req_userdata(req))->no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_opendir(fuse_req_t req, fuse_ino_t node, struct fuse_file_info *fi)
{
	if (((struct reader *)fuse_req_userdata(req))->no_opendir) {
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
	struct union_fs *u = u_of(req);
	struct read_reply r;
	struct union_node n;
	struct image *img;
	int rc = union_node_get(u, node, &n);

	if (rc == 0 && !S_ISREG(n.in.mode))
		rc = -EISDIR;
	if (rc == 0 && off < 0)
		rc = -EINVAL;
	img = rc == 0 ? union_image(u, n.layer) : NULL;
	if (rc == 0)
		rc = file_read(img, &n.in, (uint64_t)off, size, &r);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (r.n)
		fuse_reply_iov(req, r.iov, r.n);
	else
		fuse_reply_buf(req, NULL, 0);
	read_reply_done(img, &r);
}

struct fill {
	fuse_req_t req;
	char *buf;
	size_t size, used;
	bool plus;
};

static int fill_one(void *ctx, const struct union_dirent *d)
{
	struct fill *f = ctx;
	struct fuse_entry_param e;
	size_t n;

	if (f->plus && d->node) {
		entry_of(d->node, &d->n, &e);
		n = fuse_add_direntry_plus(f->req, f->buf + f->used, f->size - f->used, d->name, &e,
					   (off_t)d->cookie);
	} else if (f->plus) {
		unlinked_entry(d->ino, d->type, &e);
		n = fuse_add_direntry_plus(f->req, f->buf + f->used, f->size - f->used, d->name, &e,
					   (off_t)d->cookie);
	} else {
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = d->ino;
		e.attr.st_mode = d->type;
		n = fuse_add_direntry(f->req, f->buf + f->used, f->size - f->used, d->name, &e.attr,
				      (off_t)d->cookie);
	}
	if (n > f->size - f->used)
		return 1; /* not sent: the next request starts with it */
	f->used += n;
	return 0;
}

static void readdir_common(fuse_req_t req, fuse_ino_t node, size_t size, off_t off, bool plus)
{
	struct union_fs *u = u_of(req);
	struct fill f = { .req = req, .plus = plus };
	struct union_node dir;
	struct stat st;
	int r = union_node_get(u, node, &dir);

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
	union_stat(&dir, &st);
	/* "." and ".." (offsets 1 and 2): names only, the kernel resolves them. */
	for (off_t dot = off; dot < 2; dot++) {
		struct fuse_entry_param e;
		size_t n;

		memset(&e, 0, sizeof(e));
		e.attr.st_mode = S_IFDIR;
		e.attr.st_ino = dot == 0 ? st.st_ino : 0;
		n = plus ? fuse_add_direntry_plus(req, f.buf + f.used, f.size - f.used, dot ? ".." : ".", &e, dot + 1)
			 : fuse_add_direntry(req, f.buf + f.used, f.size - f.used, dot ? ".." : ".", &e.attr, dot + 1);
		if (n > f.size - f.used)
			goto reply;
		f.used += n;
	}
	r = union_readdir(u, node, off > 2 ? (uint64_t)off : 0,
			  !plus ? UNION_PLUS_NONE
			  : plus_links_files(&((struct reader *)fuse_req_userdata(req))->plus,
					     fuse_req_ctx(req)->pid) ? UNION_PLUS_ALL
								     : UNION_PLUS_DIRS,
			  fill_one, &f);
	/* A damaged entry: what came before it is still answered. */
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

static int xattr_prepare(struct union_fs *u, fuse_ino_t node, size_t *size, struct union_node *n,
			 char **buf)
{
	int r = union_node_get(u, node, n);

	*buf = NULL;
	if (*size > XATTR_REPLY_MAX)
		*size = XATTR_REPLY_MAX;
	if (r == 0 && *size > 0 && !(*buf = malloc(*size)))
		r = -ENOMEM;
	return r;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t node, const char *name, size_t size)
{
	struct union_fs *u = u_of(req);
	struct union_node n;
	char *buf;
	int r = xattr_prepare(u, node, &size, &n, &buf);

	if (r == 0)
		r = union_xattr_get(u, &n, name, buf, size);
	reply_xattr(req, r, buf, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t node, size_t size)
{
	struct union_fs *u = u_of(req);
	struct union_node n;
	char *buf;
	int r = xattr_prepare(u, node, &size, &n, &buf);

	if (r == 0)
		r = union_xattr_list(u, &n, fuse_req_ctx(req)->uid == 0, buf, size);
	reply_xattr(req, r, buf, size);
}

static void op_statfs(fuse_req_t req, fuse_ino_t node)
{
	struct union_fs *u = u_of(req);
	struct statvfs st, one;

	/* The sizes of all layers together; names as the top layer's. */
	image_statfs(union_image(u, union_layers(u) - 1), &st);
	st.f_blocks = 0;
	for (uint32_t i = 0; i < union_layers(u); i++) {
		image_statfs(union_image(u, i), &one);
		st.f_blocks += one.f_blocks * (one.f_frsize ? one.f_frsize : 1) /
			       (st.f_frsize ? st.f_frsize : 1);
	}
	fuse_reply_statfs(req, &st);
}

const struct fuse_lowlevel_ops union_ops = {
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

/* A union's images share two block caches (image_open_shared): a cold
 * walk reads each layer's blocks in runs, and caches of their own were
 * 1,024 x 2 data blocks (288 MiB of PSS for the 1m set after reading
 * 10,000 of its files). The sizes of one image's, the most a cache takes
 * for metadata. */
#define UNION_MD_SLOTS BLOCK_CACHE_MAX_SLOTS
#define UNION_DATA_SLOTS 8

int reader_union_open(struct reader *rd, int *fds, unsigned n, char *err, size_t errlen)
{
	char why[200];
	int r = -ENOMEM;

	rd->layer_fds = fds;
	rd->nlayers = n;
	if (n == 0 || n > UNION_MAX_LAYERS) {
		snprintf(err, errlen, "a union takes 1 to %u images, not %u", UNION_MAX_LAYERS, n);
		return -EINVAL;
	}
	if (!(rd->layers = calloc(n, sizeof(*rd->layers))) || !(rd->caches = calloc(2, sizeof(*rd->caches)))) {
		snprintf(err, errlen, "out of memory");
		return r;
	}
	block_cache_init(&rd->caches[0], UNION_MD_SLOTS);
	block_cache_init(&rd->caches[1], UNION_DATA_SLOTS);
	for (unsigned i = 0; i < n; i++) {
		r = image_open_shared(fds[i], &rd->caches[0], &rd->caches[1], i + 1, &rd->layers[i], why,
				      sizeof(why));
		if (r < 0) {
			snprintf(err, errlen, "image %u of %u: %s", i + 1, n, why);
			return r;
		}
	}
	return union_open(rd->layers, n, &rd->u, err, errlen);
}

void reader_union_close(struct reader *rd)
{
	union_close(rd->u);
	rd->u = NULL;
	for (unsigned i = 0; i < rd->nlayers; i++) {
		if (rd->layers)
			image_close(rd->layers[i]);
		if (rd->layer_fds && rd->layer_fds[i] >= 0)
			close(rd->layer_fds[i]);
	}
	if (rd->caches) {
		block_cache_destroy(&rd->caches[0]);
		block_cache_destroy(&rd->caches[1]);
	}
	free(rd->caches);
	free(rd->layers);
	free(rd->layer_fds);
	rd->caches = NULL;
	rd->layers = NULL;
	rd->layer_fds = NULL;
	rd->nlayers = 0;
}

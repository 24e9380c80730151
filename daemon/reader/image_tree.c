/* One image as the tree a mount serves (tree.h): its node ids, lookups
 * and listings, with the image's own attributes. */
#include "config.h"

#include "reader/ops.h"
#include "reader/tree.h"

#include <errno.h>

/* FUSE node ids: 1 is the root; any other inode is its reference + 2
 * (references are 48 bits and 0 and 1 are taken), so no table of
 * looked-up inodes is needed and FORGET has nothing to do. */
uint64_t image_node_of(const struct image *img, uint64_t id)
{
	return id == image_root(img) ? FUSE_ROOT_ID : id + 2;
}

static int inode_of_node(struct image *img, uint64_t node, struct inode *in)
{
	if (node == FUSE_ROOT_ID)
		return inode_get(img, image_root(img), in);
	if (node < 2)
		return -EIO;
	return inode_get(img, node - 2, in);
}

static int image_node_get(struct reader *rd, uint64_t node, struct tree_node *out)
{
	/* Not a memset: the inode is all of it, and this runs per request. */
	out->img = rd->img;
	out->layer = 0;
	out->merged = false;
	return inode_of_node(rd->img, node, &out->in);
}

static int image_lookup(struct reader *rd, uint64_t parent, const char *name, uint64_t *node,
			struct tree_node *out)
{
	struct image *img = rd->img;
	struct inode dir;
	uint64_t id;
	int r = inode_of_node(img, parent, &dir);

	if (r == 0)
		r = dir_lookup(img, &dir, name, &id);
	if (r < 0)
		return r;
	out->img = img;
	out->layer = 0;
	out->merged = false;
	*node = image_node_of(img, id);
	return inode_get(img, id, &out->in);
}

static void image_stat(const struct tree_node *n, struct stat *st)
{
	inode_stat(&n->in, st);
}

static uint64_t image_dotdot_ino(const struct tree_node *dir)
{
	return dir->in.parent;
}

static int image_list(struct reader *rd, const struct tree_node *dir, uint64_t cookie,
		      enum tree_plus plus, tree_emit_fn emit, void *ctx)
{
	struct image *img = rd->img;
	struct tree_dirent e;
	struct dir_iter it;
	struct dir_entry de;
	int r = dir_open(img, &dir->in, cookie, &it);

	e.n.img = img;
	e.n.layer = 0;
	e.n.merged = false;
	while (r == 0 && (r = dir_next(img, &it, &de)) > 0) {
		e.name = de.name;
		e.cookie = de.cookie;
		e.type = dir_entry_mode(de.type);
		e.ino = de.ino;
		e.node = 0;
		/* Only as plus asks: an entry sent unlinked (or by READDIR)
		 * does not even have its inode read. */
		if (tree_plus_wants(plus, e.type)) {
			if ((r = inode_get(img, de.id, &e.n.in)) < 0)
				break;
			e.node = image_node_of(img, de.id);
		}
		if (emit(ctx, &e))
			return 0;
		r = 0;
	}
	return r;
}

static int image_xattr_list(const struct tree_node *n, bool with_trusted, char *buf, size_t size)
{
	return xattr_list(n->img, &n->in, with_trusted, buf, size);
}

static int image_xattr_get(const struct tree_node *n, const char *name, void *buf, size_t size)
{
	return xattr_get(n->img, &n->in, name, buf, size);
}

static void image_tree_statfs(struct reader *rd, struct statvfs *st)
{
	image_statfs(rd->img, st);
}

const struct tree_kind image_tree = {
	.node_get = image_node_get,
	.lookup = image_lookup,
	.stat = image_stat,
	.dotdot_ino = image_dotdot_ino,
	.list = image_list,
	.xattr_list = image_xattr_list,
	.xattr_get = image_xattr_get,
	.statfs = image_tree_statfs,
};

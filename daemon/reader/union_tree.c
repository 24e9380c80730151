/* squash-reader's union of images (union_tree.h). */
#include "config.h"

#include "reader/union_tree.h"
#include "reader/union_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROOT_NODE 1u                 /* FUSE_ROOT_ID: merged directory 0 */
#define MERGED_BIT (1ull << 63)      /* other merged directories: the bit | index */
/* A layer entry's node id: its inode reference (48 bits) above the layer
 * (12 bits), + 2. The layer goes low because the kernel hashes FUSE
 * inodes by node id and mixes high bits poorly: bundles packed alike hold
 * the same references, and with the layer on top 1,024 such bundles made
 * chains of 1,024 in the inode hash (a cold `find` of a million entries
 * took 47 s instead of 9). */
#define LAYER_BITS 12
#define LAYER_MASK ((1u << LAYER_BITS) - 1)
#define REF_MAX (1ull << 48)

#define XATTR_LIST_MAX_BYTES 65536u
static const char overlay_prefix[] = "trusted.overlay.";

static uint64_t layer_node(uint32_t layer, uint64_t ref)
{
	return (ref << LAYER_BITS | layer) + 2;
}

static uint64_t dir_node(uint32_t idx)
{
	return idx == 0 ? ROOT_NODE : MERGED_BIT | idx;
}

static struct mdir *dir_at(struct union_fs *u, uint32_t idx)
{
	uint64_t j = (uint64_t)idx + (1u << CHUNK0_BITS);
	unsigned k = (unsigned)(63 - __builtin_clzll(j)) - CHUNK0_BITS;

	return atomic_load_explicit(&u->chunk[k], memory_order_acquire) + (j - ((uint64_t)1 << (CHUNK0_BITS + k)));
}

/* A new merged directory of layers (taken), index in *idx (u->lock held). */
static int dir_add_locked(struct union_fs *u, struct layer_dir *layers, uint32_t nlayers, uint32_t *idx)
{
	uint32_t i = atomic_load(&u->ndirs);
	uint64_t j = (uint64_t)i + (1u << CHUNK0_BITS);
	unsigned k = (unsigned)(63 - __builtin_clzll(j)) - CHUNK0_BITS;
	struct mdir *d;

	if (k >= CHUNKS)
		return -ENOMEM;
	if (!atomic_load(&u->chunk[k])) {
		struct mdir *c = calloc((size_t)1 << (CHUNK0_BITS + k), sizeof(*c));

		if (!c)
			return -ENOMEM;
		atomic_store_explicit(&u->chunk[k], c, memory_order_release);
	}
	d = dir_at(u, i);
	d->layers = layers;
	d->nlayers = nlayers;
	atomic_store_explicit(&u->ndirs, i + 1, memory_order_release);
	*idx = i;
	return 0;
}

int union_open(struct image **imgs, uint32_t n, struct union_fs **out, char *err, size_t errlen)
{
	struct union_fs *u;
	struct layer_dir *roots;
	uint32_t idx;

	*out = NULL;
	if (n == 0 || n > UNION_MAX_LAYERS) {
		snprintf(err, errlen, "a union takes 1 to %u images, not %u", UNION_MAX_LAYERS, n);
		return -EINVAL;
	}
	u = calloc(1, sizeof(*u));
	roots = calloc(n, sizeof(*roots));
	if (!u || !roots) {
		free(u);
		free(roots);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	u->n = n;
	u->img = imgs;
	pthread_mutex_init(&u->lock, NULL);
	for (uint32_t i = 0; i < n; i++)
		roots[i] = (struct layer_dir){ .layer = n - 1 - i, .ref = image_root(imgs[n - 1 - i]) };
	if (dir_add_locked(u, roots, n, &idx) < 0) {
		free(roots);
		union_close(u);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*out = u;
	return 0;
}

void union_close(struct union_fs *u)
{
	uint32_t nd;

	if (!u)
		return;
	nd = atomic_load(&u->ndirs);
	for (uint32_t i = 0; i < nd; i++) {
		struct mdir *d = dir_at(u, i);

		free(d->layers);
		listing_free(atomic_load(&d->list));
	}
	for (unsigned k = 0; k < CHUNKS; k++)
		free(atomic_load(&u->chunk[k]));
	pthread_mutex_destroy(&u->lock);
	free(u);
}

/* d's listing, made on first use. Made without the lock (it reads the
 * images); of two threads making it at once, the first to finish wins. */
static int listing_of(struct union_fs *u, struct mdir *d, const struct listing **out)
{
	struct listing *l = atomic_load_explicit(&d->list, memory_order_acquire), *expected = NULL;
	int r;

	if (!l) {
		if ((r = listing_make(u, d, &l)) < 0)
			return r;
		if (!atomic_compare_exchange_strong_explicit(&d->list, &expected, l, memory_order_acq_rel,
							     memory_order_acquire)) {
			listing_free(l);
			l = expected;
		}
	}
	*out = l;
	return 0;
}

static int resolve(struct union_fs *u, uint64_t node, struct mdir **d, uint32_t *idx, struct tree_node *out)
{
	memset(out, 0, sizeof(*out));
	*d = NULL;
	if (node == ROOT_NODE || (node & MERGED_BIT)) {
		uint32_t i = node == ROOT_NODE ? 0 : (node & ~MERGED_BIT) > UINT32_MAX ? UINT32_MAX
										 : (uint32_t)(node & ~MERGED_BIT);

		if (i >= atomic_load_explicit(&u->ndirs, memory_order_acquire) || (i == 0 && node != ROOT_NODE))
			return -EIO;
		*d = dir_at(u, i);
		*idx = i;
		out->merged = true;
		out->dir = i;
		out->nlayers = (*d)->nlayers;
		out->layer = (*d)->layers[0].layer;
		out->img = u->img[out->layer];
		return inode_get(out->img, (*d)->layers[0].ref, &out->in);
	}
	if (node < 2)
		return -EIO;
	node -= 2;
	out->layer = (uint32_t)(node & LAYER_MASK);
	if (out->layer >= u->n || (node >> LAYER_BITS) >= REF_MAX)
		return -EIO;
	out->img = u->img[out->layer];
	return inode_get(out->img, node >> LAYER_BITS, &out->in);
}

int union_node_get(struct union_fs *u, uint64_t node, struct tree_node *out)
{
	struct mdir *d;
	uint32_t idx;

	return resolve(u, node, &d, &idx, out);
}

void union_stat(const struct tree_node *n, struct stat *st)
{
	inode_stat(&n->in, st);
	if (n->merged) {
		/* The bit and the index: the root (index 0) too, whose node
		 * id is 1, or the first merged directory would share its
		 * number and `find` would call it a loop. */
		st->st_ino = (ino_t)(MERGED_BIT | n->dir);
		/* overlayfs does not count a merged directory's subdirectories. */
		if (n->nlayers > 1)
			st->st_nlink = 1;
	} else {
		/* Inode numbers are per image: the layer keeps them apart. */
		st->st_ino = (ino_t)((uint64_t)n->layer << 32 | n->in.ino);
	}
}

/* c's node (its merged directory made on first use) and what it is. */
static int child_node(struct union_fs *u, const struct listing *l, struct child *c, uint64_t *node,
		      struct tree_node *out)
{
	uint32_t m;
	int r;

	memset(out, 0, sizeof(*out));
	out->layer = c->layer;
	out->img = u->img[c->layer];
	if ((r = inode_get(out->img, c->ref, &out->in)) < 0)
		return r;
	if (c->nlower == 0) {
		*node = layer_node(c->layer, c->ref);
		return 0;
	}
	m = atomic_load_explicit(&c->merged, memory_order_acquire);
	if (m == 0) {
		pthread_mutex_lock(&u->lock);
		m = atomic_load(&c->merged);
		if (m == 0) {
			struct layer_dir *layers = malloc(((size_t)c->nlower + 1) * sizeof(*layers));
			uint32_t idx;

			r = -ENOMEM;
			if (layers) {
				layers[0] = (struct layer_dir){ .layer = c->layer, .ref = c->ref };
				memcpy(layers + 1, l->lowers + c->lower_off, (size_t)c->nlower * sizeof(*layers));
				r = dir_add_locked(u, layers, c->nlower + 1, &idx);
				if (r < 0)
					free(layers);
			}
			if (r == 0) {
				m = idx + 1;
				atomic_store_explicit(&c->merged, m, memory_order_release);
			}
		}
		pthread_mutex_unlock(&u->lock);
		if (m == 0)
			return r;
	}
	out->merged = true;
	out->dir = m - 1;
	out->nlayers = c->nlower + 1;
	*node = dir_node(m - 1);
	return 0;
}

int union_lookup(struct union_fs *u, uint64_t parent, const char *name, uint64_t *node,
		 struct tree_node *child)
{
	struct tree_node p;
	struct mdir *d;
	uint32_t idx;
	size_t len = strlen(name);
	uint64_t id;
	int r = resolve(u, parent, &d, &idx, &p);

	if (r < 0)
		return r;
	if (!S_ISDIR(p.in.mode))
		return -ENOTDIR;
	if (len > 256)
		return -ENAMETOOLONG;
	if (d) {
		const struct listing *l;
		uint32_t *slot;

		if ((r = listing_of(u, d, &l)) < 0)
			return r;
		slot = hash_slot(l, name, len);
		if (*slot == 0 || (l->child[*slot - 1].flags & C_HIDDEN))
			return -ENOENT;
		return child_node(u, l, &l->child[*slot - 1], node, child);
	}
	/* A directory of one layer: that layer's, whiteouts left out. */
	struct image *img = u->img[p.layer];

	if ((r = dir_lookup(img, &p.in, name, &id)) < 0)
		return r;
	memset(child, 0, sizeof(*child));
	child->layer = p.layer;
	child->img = img;
	if ((r = inode_get(img, id, &child->in)) < 0)
		return r;
	if (S_ISCHR(child->in.mode) && child->in.rdev == 0)
		return -ENOENT;
	*node = layer_node(p.layer, id);
	return 0;
}

int union_readdir(struct union_fs *u, const struct tree_node *dir, uint64_t cookie,
		  enum tree_plus plus, tree_emit_fn emit, void *ctx)
{
	struct tree_dirent e;
	struct mdir *d = dir->merged ? dir_at(u, dir->dir) : NULL;
	struct stat st;
	int r;

	if (!S_ISDIR(dir->in.mode))
		return -ENOTDIR;
	if (d) {
		const struct listing *l;
		char name[257];

		if ((r = listing_of(u, d, &l)) < 0)
			return r;
		for (uint64_t i = cookie < 3 ? 0 : cookie - 2; i < l->n; i++) {
			struct child *c = &l->child[i];

			if (c->flags & C_HIDDEN)
				continue;
			memset(&e, 0, sizeof(e));
			memcpy(name, l->names + c->name_off, c->namelen);
			name[c->namelen] = '\0';
			e.name = name;
			e.cookie = i + 3;
			e.type = dir_entry_mode(c->type);
			e.ino = (uint64_t)c->layer << 32 | c->ino;
			if (tree_plus_wants(plus, e.type)) {
				if ((r = child_node(u, l, c, &e.node, &e.n)) < 0)
					return r;
				union_stat(&e.n, &st);
				e.ino = st.st_ino;
			}
			if (emit(ctx, &e))
				return 0;
		}
		return 0;
	}
	/* A directory of one layer. */
	struct image *img = dir->img;
	struct dir_iter it;
	struct dir_entry de;

	if ((r = dir_open(img, &dir->in, cookie, &it)) < 0)
		return r;
	while ((r = dir_next(img, &it, &de)) > 0) {
		memset(&e, 0, sizeof(e));
		e.name = de.name;
		e.cookie = de.cookie;
		e.type = dir_entry_mode(de.type);
		e.ino = (uint64_t)dir->layer << 32 | de.ino;
		if (tree_plus_wants(plus, e.type) || is_chr_type(de.type)) {
			e.n.layer = dir->layer;
			e.n.img = img;
			if ((r = inode_get(img, de.id, &e.n.in)) < 0)
				return r;
			if (S_ISCHR(e.n.in.mode) && e.n.in.rdev == 0)
				continue;
			e.node = layer_node(dir->layer, de.id);
		}
		if (emit(ctx, &e))
			return 0;
	}
	return r;
}

static bool overlay_private(const char *name)
{
	return !strncmp(name, overlay_prefix, sizeof(overlay_prefix) - 1);
}

int union_xattr_list(const struct tree_node *n, bool with_trusted, char *buf, size_t size)
{
	struct image *img = n->img;
	char *all;
	size_t kept = 0;
	int r;

	/* trusted.* (overlayfs' own among them) is listed to root only. */
	if (!with_trusted)
		return xattr_list(img, &n->in, false, buf, size);
	if (!(all = malloc(XATTR_LIST_MAX_BYTES)))
		return -ENOMEM;
	r = xattr_list(img, &n->in, true, all, XATTR_LIST_MAX_BYTES);
	for (int i = 0; r > 0 && i < r;) {
		size_t len = strnlen(all + i, (size_t)(r - i));

		if (!overlay_private(all + i)) {
			if (size > 0 && kept + len + 1 > size) {
				r = -ERANGE;
				break;
			}
			if (size > 0)
				memcpy(buf + kept, all + i, len + 1);
			kept += len + 1;
		}
		i += (int)len + 1;
	}
	free(all);
	return r < 0 ? r : (int)kept;
}

int union_xattr_get(const struct tree_node *n, const char *name, void *buf, size_t size)
{
	/* overlayfs answers its own attributes itself: none, for a layer's. */
	if (overlay_private(name))
		return -ENODATA;
	return xattr_get(n->img, &n->in, name, buf, size);
}

void union_statfs(const struct union_fs *u, struct statvfs *st)
{
	struct statvfs one;

	image_statfs(u->img[u->n - 1], st);
	st->f_blocks = 0;
	for (uint32_t i = 0; i < u->n; i++) {
		image_statfs(u->img[i], &one);
		st->f_blocks += one.f_blocks * (one.f_frsize ? one.f_frsize : 1) /
				(st->f_frsize ? st->f_frsize : 1);
	}
}

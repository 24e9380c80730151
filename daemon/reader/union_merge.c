/* squash-reader's union (union_tree.h): a merged directory's listing,
 * made once from its layers' own listings with overlayfs' rules. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reader/union_internal.h"

void listing_free(struct listing *l)
{
	if (!l)
		return;
	free(l->child);
	free(l->names);
	free(l->lowers);
	free(l->hash);
	free(l);
}

/* An overlayfs whiteout: a character device 0/0. 1, 0 or -errno. */
static int is_whiteout(struct image *img, uint64_t ref)
{
	struct inode in;
	int r = inode_get(img, ref, &in);

	if (r < 0)
		return r;
	return S_ISCHR(in.mode) && in.rdev == 0;
}

/* overlayfs' opaque directory (trusted.overlay.opaque = "y"): 1, 0 or -errno. */
static int is_opaque(struct image *img, uint64_t ref)
{
	struct inode in;
	char v[2];
	int r = inode_get(img, ref, &in);

	if (r < 0)
		return r;
	if (in.xattr == INODE_NO_XATTR)
		return 0;
	r = xattr_get(img, &in, "trusted.overlay.opaque", v, sizeof(v));
	if (r == -ENODATA || r == -ERANGE)
		return 0;
	if (r < 0)
		return r;
	return r == 1 && v[0] == 'y';
}

static uint32_t name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

/* The slot of name in l's hash: its entry, or the empty slot it would take. */
uint32_t *hash_slot(const struct listing *l, const char *name, size_t len)
{
	for (uint32_t i = name_hash(name, len) & l->hmask;; i = (i + 1) & l->hmask) {
		uint32_t *s = &l->hash[i];

		if (*s == 0)
			return s;
		const struct child *c = &l->child[*s - 1];
		if (c->namelen == len && !memcmp(l->names + c->name_off, name, len))
			return s;
	}
}

static int hash_grow(struct listing *l)
{
	uint32_t size = (l->hmask + 1) * 2;
	uint32_t *h = calloc(size, sizeof(*h));

	if (!h)
		return -ENOMEM;
	free(l->hash);
	l->hash = h;
	l->hmask = size - 1;
	for (uint32_t i = 0; i < l->n; i++) {
		const struct child *c = &l->child[i];

		*hash_slot(l, l->names + c->name_off, c->namelen) = i + 1;
	}
	return 0;
}

/* While a listing is made: the lower directories found so far, in the
 * order found (per child: topmost first), and each child's lowest. */
struct builder {
	struct listing *l;
	uint32_t cap, cap2, names_len, names_cap;
	struct { uint32_t child; struct layer_dir d; } *found;
	uint32_t nfound, found_cap;
	struct layer_dir *lowest;
};

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem, uint32_t max)
{
	uint64_t c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	if (need > max)
		return -ENOMEM;
	while (c < need)
		c *= 2;
	if (c > max)
		c = max;
	q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = (uint32_t)c;
	return 0;
}

static int add_child(struct builder *b, uint32_t *slot, const struct dir_entry *de, uint32_t layer)
{
	struct listing *l = b->l;
	struct child *c;
	int r;

	if ((r = grow((void **)&l->child, &b->cap, l->n + 1, sizeof(*l->child), CHILD_MAX)) < 0 ||
	    (r = grow((void **)&b->lowest, &b->cap2, l->n + 1, sizeof(*b->lowest), CHILD_MAX)) < 0 ||
	    (r = grow((void **)&l->names, &b->names_cap, b->names_len + (uint32_t)de->namelen, 1, NAMES_MAX)) < 0)
		return r;
	c = &l->child[l->n];
	memset(c, 0, sizeof(*c));
	c->ref = de->id;
	c->ino = de->ino;
	c->layer = (uint16_t)layer;
	c->type = (uint8_t)de->type;
	c->namelen = (uint16_t)de->namelen;
	c->name_off = b->names_len;
	memcpy(l->names + b->names_len, de->name, de->namelen);
	b->names_len += (uint32_t)de->namelen;
	b->lowest[l->n] = (struct layer_dir){ .layer = layer, .ref = de->id };
	*slot = ++l->n;
	/* Half full at most. */
	if ((uint64_t)l->n * 2 > l->hmask)
		return hash_grow(l);
	return 0;
}

/* One entry of layer's listing into the merged directory being made. */
static int merge_entry(struct union_fs *u, struct builder *b, const struct dir_entry *de, uint32_t layer)
{
	struct listing *l = b->l;
	uint32_t *slot = hash_slot(l, de->name, de->namelen);
	struct child *c;
	int r;

	if (*slot == 0) {
		if ((r = add_child(b, slot, de, layer)) < 0)
			return r;
		c = &l->child[l->n - 1];
		if (is_chr_type(de->type)) {
			if ((r = is_whiteout(u->img[layer], de->id)) < 0)
				return r;
			c->flags = r ? C_HIDDEN : C_STOPPED;
		} else if (!is_dir_type(de->type)) {
			c->flags = C_STOPPED;
		}
		return 0;
	}
	c = &l->child[*slot - 1];
	if (c->flags & (C_HIDDEN | C_STOPPED))
		return 0;
	/* A directory above: an opaque one hides this layer's entry. */
	if (!(c->flags & C_OPAQUE_CHECKED)) {
		struct layer_dir *low = &b->lowest[*slot - 1];

		if ((r = is_opaque(u->img[low->layer], low->ref)) < 0)
			return r;
		if (r) {
			c->flags |= C_STOPPED;
			return 0;
		}
		c->flags |= C_OPAQUE_CHECKED;
	}
	/* A non-directory (or a whiteout) below a directory ends the merge. */
	if (!is_dir_type(de->type)) {
		c->flags |= C_STOPPED;
		return 0;
	}
	if ((r = grow((void **)&b->found, &b->found_cap, b->nfound + 1, sizeof(*b->found), CHILD_MAX)) < 0)
		return r;
	b->found[b->nfound].child = *slot - 1;
	b->found[b->nfound].d = (struct layer_dir){ .layer = layer, .ref = de->id };
	b->nfound++;
	b->lowest[*slot - 1] = (struct layer_dir){ .layer = layer, .ref = de->id };
	c->nlower++;
	c->flags &= (uint8_t)~C_OPAQUE_CHECKED;
	return 0;
}

/* Makes d's listing from its layers' own listings. */
int listing_make(struct union_fs *u, const struct mdir *d, struct listing **out)
{
	struct builder b = { 0 };
	struct listing *l = calloc(1, sizeof(*l));
	int r = -ENOMEM;

	if (!l)
		return -ENOMEM;
	b.l = l;
	l->hmask = 15;
	if (!(l->hash = calloc(l->hmask + 1, sizeof(*l->hash))))
		goto out;
	for (uint32_t i = 0; i < d->nlayers; i++) {
		struct image *img = u->img[d->layers[i].layer];
		struct dir_iter it;
		struct dir_entry de;
		struct inode dir;

		if ((r = inode_get(img, d->layers[i].ref, &dir)) < 0)
			goto out;
		if (!S_ISDIR(dir.mode)) {
			r = -EIO;
			goto out;
		}
		if ((r = dir_open(img, &dir, 0, &it)) < 0)
			goto out;
		while ((r = dir_next(img, &it, &de)) > 0)
			if ((r = merge_entry(u, &b, &de, d->layers[i].layer)) < 0)
				goto out;
		if (r < 0)
			goto out;
	}
	/* Each child's lower directories side by side, in the order found
	 * (topmost first): a stable counting sort by child. */
	if (b.nfound) {
		uint32_t off = 0;

		if (!(l->lowers = malloc((size_t)b.nfound * sizeof(*l->lowers)))) {
			r = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 0; i < l->n; i++) {
			l->child[i].lower_off = off;
			off += l->child[i].nlower;
			l->child[i].nlower = 0;
		}
		for (uint32_t i = 0; i < b.nfound; i++) {
			struct child *c = &l->child[b.found[i].child];

			l->lowers[c->lower_off + c->nlower++] = b.found[i].d;
		}
	}
	r = 0;
out:
	free(b.found);
	free(b.lowest);
	if (r < 0)
		listing_free(l);
	else
		*out = l;
	return r;
}


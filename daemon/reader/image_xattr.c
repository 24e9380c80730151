/* squash-reader's image layer: extended attributes (image.h).
 *
 * squashfs keeps them in two tables behind the superblock's
 * xattr_id_table_start: there, a header (the xattr table's start, the
 * number of ids) and the index of the id table's metadata blocks; each id
 * (16 bytes: a reference into the xattr table, a count, a size) names the
 * list of one set of attributes, which inodes of the "L" types point at.
 * An entry of a list: type (u16: the prefix, 0 user, 1 trusted, 2
 * security, | 0x100 when the value is stored out of line), name size
 * (u16), the name without its prefix, then the value: size (u32) and
 * bytes, or for an out-of-line one 8 bytes of reference to a size and
 * bytes elsewhere in the xattr table. Everything here is the image's:
 * references stay inside the xattr table, names and values within the
 * kernel's limits, walks bounded by count and by bytes. */
#include "config.h"

#include "reader/image.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "reader/image_format.h"

#define XATTR_ID_SIZE 16u
#define XATTR_TYPE_OOL 0x100u
#define XATTR_PREFIX_MASK 0xffu
#define XATTR_NAME_MAXLEN 255u        /* the kernel's XATTR_NAME_MAX */
#define XATTR_VALUE_MAX 65536u        /* XATTR_SIZE_MAX */
#define XATTR_LIST_MAXLEN 65536u      /* XATTR_LIST_MAX */
/* Bounds of one walk: no list mksquashfs writes comes near them. */
#define XATTR_COUNT_MAX 65536u
#define XATTR_WALK_BYTES (16u << 20)

static const char *const prefixes[] = { "user.", "trusted.", "security." };
#define N_PREFIXES (sizeof(prefixes) / sizeof(prefixes[0]))

int xattr_open(struct image *img, uint64_t id_start)
{
	unsigned char h[16];
	uint64_t blocks;
	uint32_t ids;
	int r;

	img->xattr_ids = 0;
	img->xattr_table = id_start != SQUASH_TABLE_ABSENT;
	if (!img->xattr_table)
		return 0;
	if (id_start < 96 || id_start >= img->bytes_used)
		return -EIO;
	if ((r = read_at(img, id_start, h, sizeof(h))) < 0)
		return r;
	ids = le32(h + 8);
	blocks = ((uint64_t)ids * XATTR_ID_SIZE + SQUASH_METADATA_SIZE - 1) / SQUASH_METADATA_SIZE;
	/* The xattr table lies before its id table; the index of the id
	 * table's blocks fits in the image. */
	if (ids == 0 || le64(h) < SQUASH_SUPERBLOCK_SIZE || le64(h) >= id_start ||
	    8 * blocks > img->bytes_used - id_start - 16)
		return -EIO;
	img->xattr_start = le64(h);
	img->xattr_index = id_start + 16;
	img->xattr_ids = ids;
	return 0;
}

/* A reference into the xattr table (block << 16 | offset) as a cursor. */
static int xattr_ref(const struct image *img, uint64_t ref, struct md_cursor *cur)
{
	/* The table ends where the id table's header begins. */
	if ((ref & 0xffff) >= SQUASH_METADATA_SIZE || (ref >> 16) >= img->xattr_index - 16 - img->xattr_start)
		return -EIO;
	cur->block = img->xattr_start + (ref >> 16);
	cur->offset = (uint32_t)(ref & 0xffff);
	return 0;
}

struct xattr_walk {
	struct md_cursor cur;
	uint32_t left;      /* entries not yet read */
	uint64_t budget;    /* bytes the walk may still read */
};

struct xattr_entry {
	unsigned type;      /* with XATTR_TYPE_OOL */
	char name[XATTR_NAME_MAXLEN + 1];
	size_t namelen;
	uint32_t vsize;     /* the stored value's size (8 for an out-of-line one) */
};

/* 1 and in's entry of the xattr id table (reference, count, size); 0: in
 * has no xattrs; -EIO for an index past the table. */
static int id_entry(struct image *img, const struct inode *in, unsigned char e[XATTR_ID_SIZE])
{
	int r;

	if (in->xattr == INODE_NO_XATTR || img->xattr_ids == 0)
		return 0;
	if (in->xattr >= img->xattr_ids)
		return -EIO;
	if ((r = table_entry(img, img->xattr_index, in->xattr, XATTR_ID_SIZE, e)) < 0)
		return r;
	return 1;
}

int xattr_size_of(struct image *img, const struct inode *in, uint32_t *size)
{
	unsigned char e[XATTR_ID_SIZE];
	int r = id_entry(img, in, e);

	*size = r > 0 ? le32(e + 12) : 0;
	return r < 0 ? r : 0;
}

/* 1: a walk of in's list; 0: in has no attributes; -errno. */
static int walk_begin(struct image *img, const struct inode *in, struct xattr_walk *w)
{
	unsigned char e[XATTR_ID_SIZE];
	int r;

	if ((r = id_entry(img, in, e)) <= 0)
		return r;
	if ((r = xattr_ref(img, le64(e), &w->cur)) < 0)
		return r;
	w->left = le32(e + 8);
	w->budget = XATTR_WALK_BYTES;
	if (w->left > XATTR_COUNT_MAX)
		return -EIO;
	return w->left > 0;
}

static int walk_read(struct image *img, struct xattr_walk *w, void *buf, size_t len)
{
	if (len > w->budget)
		return -EIO;
	w->budget -= len;
	return md_read(img, &w->cur, buf, len);
}

/* Reads the next entry's type, name and value size; the cursor is left at
 * the value. 1, 0 at the end, -errno. */
static int walk_next(struct image *img, struct xattr_walk *w, struct xattr_entry *x)
{
	unsigned char h[4];
	int r;

	if (w->left == 0)
		return 0;
	w->left--;
	if ((r = walk_read(img, w, h, 4)) < 0)
		return r;
	x->type = le16(h);
	x->namelen = le16(h + 2);
	/* Names the kernel could not have stored. */
	if (x->namelen == 0 || x->namelen > XATTR_NAME_MAXLEN)
		return -EIO;
	if ((r = walk_read(img, w, x->name, x->namelen)) < 0)
		return r;
	x->name[x->namelen] = '\0';
	if (memchr(x->name, '\0', x->namelen))
		return -EIO;
	if ((r = walk_read(img, w, h, 4)) < 0)
		return r;
	x->vsize = le32(h);
	if ((x->type & XATTR_TYPE_OOL) ? x->vsize != 8 : x->vsize > XATTR_VALUE_MAX)
		return -EIO;
	return 1;
}

int xattr_list(struct image *img, const struct inode *in, bool with_trusted, char *buf,
	       size_t size)
{
	struct xattr_walk w;
	struct xattr_entry x;
	size_t total = 0;
	int r;

	/* The kernel's squashfs has no xattr handlers for an image without
	 * an xattr table (squash-pack's default, -no-xattrs): its directories
	 * and symlinks, whose operations list xattrs through them, answer
	 * EOPNOTSUPP; other files list nothing. */
	if (!img->xattr_table && (S_ISDIR(in->mode) || S_ISLNK(in->mode)))
		return -EOPNOTSUPP;
	r = walk_begin(img, in, &w);
	while (r > 0 && (r = walk_next(img, &w, &x)) > 0) {
		unsigned t = x.type & XATTR_PREFIX_MASK;
		size_t plen, len;
		int rs = walk_read(img, &w, NULL, x.vsize);

		if (rs < 0)
			return rs;
		/* Other types: the kernel has no handler for them and lists
		 * nothing; trusted.* only for the privileged. */
		if (t >= N_PREFIXES || (t == 1 && !with_trusted))
			continue;
		plen = strlen(prefixes[t]);
		len = plen + x.namelen + 1;
		if (total + len > XATTR_LIST_MAXLEN)
			return -E2BIG;
		if (size > 0) {
			if (total + len > size)
				return -ERANGE;
			memcpy(buf + total, prefixes[t], plen);
			memcpy(buf + total + plen, x.name, x.namelen + 1);
		}
		total += len;
	}
	return r < 0 ? r : (int)total;
}

/* Copies the value at the walk's cursor (x read by walk_next). */
static int value_get(struct image *img, struct xattr_walk *w, const struct xattr_entry *x,
		     void *buf, size_t size)
{
	uint32_t vsize = x->vsize;
	int r;

	if (x->type & XATTR_TYPE_OOL) {
		unsigned char v[8];

		if ((r = walk_read(img, w, v, 8)) < 0 || (r = xattr_ref(img, le64(v), &w->cur)) < 0 ||
		    (r = walk_read(img, w, v, 4)) < 0)
			return r;
		vsize = le32(v);
		if (vsize > XATTR_VALUE_MAX)
			return -EIO;
	}
	if (size == 0)
		return (int)vsize;
	if (vsize > size)
		return -ERANGE;
	if ((r = walk_read(img, w, buf, vsize)) < 0)
		return r;
	return (int)vsize;
}

int xattr_get(struct image *img, const struct inode *in, const char *name, void *buf,
	      size_t size)
{
	struct xattr_walk w;
	struct xattr_entry x;
	const char *key = NULL;
	size_t keylen;
	unsigned t;
	int r;

	for (t = 0; t < N_PREFIXES; t++)
		if (!strncmp(name, prefixes[t], strlen(prefixes[t]))) {
			key = name + strlen(prefixes[t]);
			break;
		}
	if (!key)
		return -EOPNOTSUPP;
	keylen = strlen(key);
	if (keylen == 0 || keylen > XATTR_NAME_MAXLEN)
		return -ENODATA;
	r = walk_begin(img, in, &w);
	while (r > 0 && (r = walk_next(img, &w, &x)) > 0) {
		if ((x.type & XATTR_PREFIX_MASK) == t && x.namelen == keylen &&
		    !memcmp(x.name, key, keylen))
			return value_get(img, &w, &x, buf, size);
		int rs = walk_read(img, &w, NULL, x.vsize);

		if (rs < 0)
			return rs;
	}
	return r < 0 ? r : -ENODATA;
}

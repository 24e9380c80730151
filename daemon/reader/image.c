#include "config.h"

#include "image.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "block_cache.h"

/* libsquashfuse's decompressors (gzip, xz, lzo, lz4, zstd as built), by
 * the superblock's compression id. Declared here: its headers pull in its
 * own config.h, which clashes with ours. */
typedef int (*sqfs_decompressor)(void *in, size_t insz, void *out, size_t *outsz);
extern sqfs_decompressor sqfs_decompressor_get(int compression);
#define SQFS_OK 0

#define MD_SIZE 8192u            /* decompressed metadata block */
#define NAME_MAX_LEN 256u
#define DIR_MAX_ENTRIES 256u     /* per directory header */
#define SYMLINK_MAX 4095u
#define INVALID_FRAG 0xffffffffu
#define DATA_UNCOMPRESSED (1u << 24)
#define MAX_BLOCK_SIZE (1u << 20)
#define BIDX_SLOTS 16

/* Where the previous READ of a file ended in its block list: sequential
 * reads resume there instead of summing the sizes of all earlier blocks. */
struct block_index {
	uint64_t id;     /* inode, 0: unused */
	uint64_t k;      /* block number the cursor is at */
	uint64_t pos;    /* its position in the image */
	struct md_cursor cur;
};

struct image {
	int fd;
	uint64_t bytes_used;
	uint32_t inodes, block_size, fragments;
	uint16_t compression, no_ids;
	uint64_t root, id_start, inode_start, dir_start, frag_start;
	uint32_t *ids;
	sqfs_decompressor decompress;
	struct block_cache md, data;
	pthread_mutex_t bidx_lock;
	struct block_index bidx[BIDX_SLOTS];
	unsigned bidx_next;
};

/* Never written: the data of sparse blocks. */
static unsigned char zeros[MAX_BLOCK_SIZE];

static uint16_t le16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static uint32_t le32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t le64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

/* Reads len bytes at pos, all within the image's used bytes. */
static int read_at(struct image *img, uint64_t pos, void *buf, size_t len)
{
	size_t got = 0;

	if (pos > img->bytes_used || len > img->bytes_used - pos)
		return -EIO;
	while (got < len) {
		ssize_t k = pread(img->fd, (char *)buf + got, len - got, (off_t)(pos + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		got += (size_t)k;
	}
	return 0;
}

/* ------------------------------------------------------------ metadata */

static int md_block(struct image *img, uint64_t pos, struct cached_block **out)
{
	unsigned char hdr[2], raw[MD_SIZE];
	struct cached_block *b = block_cache_get(&img->md, pos);
	size_t size, outlen = MD_SIZE;
	int r;

	if (b) {
		*out = b;
		return 0;
	}
	if ((r = read_at(img, pos, hdr, 2)) < 0)
		return r;
	size = le16(hdr) & 0x7fff;
	/* 0 would mean 32 KiB: more than any metadata block holds. */
	if (size == 0 || size > MD_SIZE)
		return -EIO;
	if ((r = read_at(img, pos + 2, raw, size)) < 0)
		return r;
	b = malloc(sizeof(*b) + MD_SIZE);
	if (!b)
		return -ENOMEM;
	b->key = pos;
	b->next = pos + 2 + size;
	b->refs = 1;
	if (le16(hdr) & 0x8000) {
		memcpy(b->data, raw, size);
		outlen = size;
	} else if (img->decompress(raw, size, b->data, &outlen) != SQFS_OK || outlen > MD_SIZE) {
		free(b);
		return -EIO;
	}
	/* An empty block would let a cursor stand still. */
	if (outlen == 0) {
		free(b);
		return -EIO;
	}
	b->len = outlen;
	*out = block_cache_put(&img->md, b);
	return 0;
}

/* Copies len bytes from the cursor (buf NULL: skips them) and advances it. */
static int md_read(struct image *img, struct md_cursor *cur, void *buf, size_t len)
{
	while (len > 0) {
		struct cached_block *b;
		size_t take;
		int r = md_block(img, cur->block, &b);

		if (r < 0)
			return r;
		if (cur->offset > b->len) {
			block_cache_release(&img->md, b);
			return -EIO;
		}
		take = b->len - cur->offset;
		if (take > len)
			take = len;
		if (buf) {
			memcpy(buf, b->data + cur->offset, take);
			buf = (char *)buf + take;
		}
		len -= take;
		cur->offset += (uint32_t)take;
		if (cur->offset == b->len) {
			cur->block = b->next;
			cur->offset = 0;
		}
		block_cache_release(&img->md, b);
	}
	return 0;
}

/* Entry idx of a table of fixed-size entries behind an index of block
 * pointers at table_start. */
static int table_entry(struct image *img, uint64_t table_start, uint64_t idx, size_t each, void *out)
{
	unsigned char p[8];
	uint64_t byte = idx * each;
	struct md_cursor cur;
	int r;

	if ((r = read_at(img, table_start + 8 * (byte / MD_SIZE), p, 8)) < 0)
		return r;
	cur.block = le64(p);
	cur.offset = (uint32_t)(byte % MD_SIZE);
	return md_read(img, &cur, out, each);
}

/* ------------------------------------------------------------ open */

int image_open(int fd, unsigned md_slots, unsigned data_slots, struct image **out,
	       char *err, size_t errlen)
{
	unsigned char sb[96];
	struct image *img;
	struct stat st;
	int r;

	*out = NULL;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot stat the image: %s", strerror(errno));
		return -errno;
	}
	img = calloc(1, sizeof(*img));
	if (!img) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	img->fd = fd;
	img->bytes_used = sizeof(sb);
	if ((uint64_t)st.st_size < sizeof(sb) || read_at(img, 0, sb, sizeof(sb)) < 0) {
		snprintf(err, errlen, "not a squashfs image: too short");
		free(img);
		return -EINVAL;
	}
	img->inodes = le32(sb + 4);
	img->block_size = le32(sb + 12);
	img->fragments = le32(sb + 16);
	img->compression = le16(sb + 20);
	img->no_ids = le16(sb + 26);
	img->root = le64(sb + 32);
	img->bytes_used = le64(sb + 40);
	img->id_start = le64(sb + 48);
	img->inode_start = le64(sb + 64);
	img->dir_start = le64(sb + 72);
	img->frag_start = le64(sb + 80);
	r = -EINVAL;
	if (le32(sb) != 0x73717368 || le16(sb + 28) != 4 || le16(sb + 30) != 0)
		snprintf(err, errlen, "not a squashfs 4.0 image");
	else if (img->block_size < 4096 || img->block_size > MAX_BLOCK_SIZE ||
		 (img->block_size & (img->block_size - 1)) ||
		 le16(sb + 22) > 20 || (1u << le16(sb + 22)) != img->block_size)
		snprintf(err, errlen, "bad block size %u", img->block_size);
	else if (img->bytes_used > (uint64_t)st.st_size)
		snprintf(err, errlen, "truncated image: %llu of %llu bytes",
			 (unsigned long long)st.st_size, (unsigned long long)img->bytes_used);
	else if (img->inode_start >= img->dir_start || img->dir_start > img->bytes_used ||
		 img->id_start >= img->bytes_used || img->no_ids == 0 ||
		 (img->fragments && img->frag_start >= img->bytes_used) ||
		 (img->root >> 16) >= img->dir_start - img->inode_start ||
		 (img->root & 0xffff) >= MD_SIZE)
		snprintf(err, errlen, "damaged superblock (table positions)");
	else if (!(img->decompress = sqfs_decompressor_get(img->compression)))
		snprintf(err, errlen, "compression %u not supported", img->compression);
	else
		r = 0;
	if (r < 0) {
		free(img);
		return r;
	}
	block_cache_init(&img->md, md_slots ? md_slots : 32);
	block_cache_init(&img->data, data_slots ? data_slots : 4);
	pthread_mutex_init(&img->bidx_lock, NULL);
	/* The id table is small (a few entries) and needed for every stat. */
	img->ids = calloc(img->no_ids, sizeof(*img->ids));
	if (!img->ids) {
		snprintf(err, errlen, "out of memory");
		image_close(img);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < img->no_ids; i++) {
		unsigned char v[4];

		if (table_entry(img, img->id_start, i, 4, v) < 0) {
			snprintf(err, errlen, "cannot read the id table");
			image_close(img);
			return -EIO;
		}
		img->ids[i] = le32(v);
	}
	*out = img;
	return 0;
}

void image_close(struct image *img)
{
	if (!img)
		return;
	block_cache_destroy(&img->md);
	block_cache_destroy(&img->data);
	pthread_mutex_destroy(&img->bidx_lock);
	free(img->ids);
	free(img);
}

uint64_t image_root(const struct image *img)
{
	return img->root;
}

void image_statfs(const struct image *img, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = img->block_size;
	st->f_frsize = img->block_size;
	st->f_blocks = (img->bytes_used + img->block_size - 1) / img->block_size;
	st->f_files = img->inodes;
	st->f_namemax = NAME_MAX_LEN;
	st->f_flag = ST_RDONLY;
}

void image_cache_stats(struct image *img, unsigned long *md_hits, unsigned long *md_misses,
		       unsigned long *data_hits, unsigned long *data_misses)
{
	*md_hits = img->md.hits;
	*md_misses = img->md.misses;
	*data_hits = img->data.hits;
	*data_misses = img->data.misses;
}

/* ------------------------------------------------------------ inodes */

int inode_get(struct image *img, uint64_t id, struct inode *in)
{
	unsigned char b[40];
	uint16_t uid_idx, gid_idx, perm;
	int r;

	memset(in, 0, sizeof(*in));
	if ((id & 0xffff) >= MD_SIZE || (id >> 16) >= img->dir_start - img->inode_start)
		return -EIO;
	in->id = id;
	in->tail.block = img->inode_start + (id >> 16);
	in->tail.offset = (uint32_t)(id & 0xffff);
	if ((r = md_read(img, &in->tail, b, 16)) < 0)
		return r;
	in->type = le16(b);
	perm = le16(b + 2) & 07777;
	uid_idx = le16(b + 4);
	gid_idx = le16(b + 6);
	in->mtime = le32(b + 8);
	in->ino = le32(b + 12);
	if (uid_idx >= img->no_ids || gid_idx >= img->no_ids)
		return -EIO;
	in->uid = img->ids[uid_idx];
	in->gid = img->ids[gid_idx];
	in->frag = INVALID_FRAG;
	in->nlink = 1;

	switch (in->type) {
	case SQUASHFS_DIR_TYPE:
		if ((r = md_read(img, &in->tail, b, 16)) < 0)
			return r;
		in->mode = S_IFDIR;
		in->start = le32(b);
		in->nlink = le32(b + 4);
		in->size = le16(b + 8);
		in->dir_offset = le16(b + 10);
		in->parent = le32(b + 12);
		break;
	case SQUASHFS_LDIR_TYPE:
		if ((r = md_read(img, &in->tail, b, 24)) < 0)
			return r;
		in->mode = S_IFDIR;
		in->nlink = le32(b);
		in->size = le32(b + 4);
		in->start = le32(b + 8);
		in->parent = le32(b + 12);
		in->dir_offset = le16(b + 18);
		break;
	case SQUASHFS_REG_TYPE:
		if ((r = md_read(img, &in->tail, b, 16)) < 0)
			return r;
		in->mode = S_IFREG;
		in->start = le32(b);
		in->frag = le32(b + 4);
		in->frag_off = le32(b + 8);
		in->size = le32(b + 12);
		break;
	case SQUASHFS_LREG_TYPE:
		if ((r = md_read(img, &in->tail, b, 40)) < 0)
			return r;
		in->mode = S_IFREG;
		in->start = le64(b);
		in->size = le64(b + 8);
		in->nlink = le32(b + 24);
		in->frag = le32(b + 28);
		in->frag_off = le32(b + 32);
		break;
	case SQUASHFS_SYMLINK_TYPE:
	case SQUASHFS_LSYMLINK_TYPE:
		if ((r = md_read(img, &in->tail, b, 8)) < 0)
			return r;
		in->mode = S_IFLNK;
		in->nlink = le32(b);
		in->size = le32(b + 4);
		if (in->size > SYMLINK_MAX)
			return -EIO;
		break;
	case SQUASHFS_BLKDEV_TYPE:
	case SQUASHFS_CHRDEV_TYPE:
	case SQUASHFS_LBLKDEV_TYPE:
	case SQUASHFS_LCHRDEV_TYPE:
		if ((r = md_read(img, &in->tail, b, 8)) < 0)
			return r;
		in->mode = in->type == SQUASHFS_BLKDEV_TYPE || in->type == SQUASHFS_LBLKDEV_TYPE
				   ? S_IFBLK : S_IFCHR;
		in->nlink = le32(b);
		in->rdev = le32(b + 4);
		break;
	case SQUASHFS_FIFO_TYPE:
	case SQUASHFS_SOCKET_TYPE:
	case SQUASHFS_LFIFO_TYPE:
	case SQUASHFS_LSOCKET_TYPE:
		if ((r = md_read(img, &in->tail, b, 4)) < 0)
			return r;
		in->mode = in->type == SQUASHFS_FIFO_TYPE || in->type == SQUASHFS_LFIFO_TYPE
				   ? S_IFIFO : S_IFSOCK;
		in->nlink = le32(b);
		break;
	default:
		return -EIO;
	}
	in->mode |= perm;
	if (S_ISDIR(in->mode)) {
		if (in->dir_offset >= MD_SIZE || in->start >= img->bytes_used - img->dir_start)
			return -EIO;
		in->start += img->dir_start;
	}
	if (S_ISREG(in->mode) && in->frag != INVALID_FRAG && in->frag >= img->fragments)
		return -EIO;
	return 0;
}

void inode_stat(const struct inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_mode = in->mode;
	st->st_nlink = in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_size = (off_t)in->size;
	st->st_blocks = (blkcnt_t)((in->size + 511) / 512);
	st->st_blksize = 4096;
	st->st_mtim.tv_sec = in->mtime;
	st->st_atim = st->st_ctim = st->st_mtim;
	if (S_ISBLK(in->mode) || S_ISCHR(in->mode))
		/* The kernel's old 32-bit encoding, as squashfs stores it. */
		st->st_rdev = makedev((in->rdev >> 8) & 0xfff, (in->rdev & 0xff) | ((in->rdev >> 12) & 0xfff00));
}

int inode_readlink(struct image *img, const struct inode *in, char *buf, size_t buflen)
{
	struct md_cursor cur = in->tail;
	int r;

	if (!S_ISLNK(in->mode))
		return -EINVAL;
	if (in->size + 1 > buflen)
		return -EIO;
	if ((r = md_read(img, &cur, buf, in->size)) < 0)
		return r;
	buf[in->size] = '\0';
	return 0;
}

/* ------------------------------------------------------------ directories */

static int dir_header(struct image *img, struct dir_iter *it)
{
	unsigned char h[12];
	uint32_t count;
	int r;

	if (it->end - it->pos < 12)
		return -EIO;
	if ((r = md_read(img, &it->cur, h, 12)) < 0)
		return r;
	count = le32(h);
	if (count >= DIR_MAX_ENTRIES)
		return -EIO;
	it->hdr_pos = it->pos;
	it->pos += 12;
	it->left = count + 1;
	it->hdr_block = le32(h + 4);
	it->hdr_ino = le32(h + 8);
	return 0;
}

/* Reads the entry at the cursor; name NULL skips the name. */
static int dir_entry_read(struct image *img, struct dir_iter *it, struct dir_entry *e)
{
	unsigned char f[8];
	size_t namelen;
	int r;

	if (it->end - it->pos < 8)
		return -EIO;
	if ((r = md_read(img, &it->cur, f, 8)) < 0)
		return r;
	namelen = (size_t)le16(f + 6) + 1;
	if (namelen > NAME_MAX_LEN || it->end - it->pos - 8 < namelen)
		return -EIO;
	if ((r = md_read(img, &it->cur, e ? e->name : NULL, namelen)) < 0)
		return r;
	it->pos += 8 + namelen;
	it->left--;
	if (!e)
		return 0;
	e->name[namelen] = '\0';
	e->namelen = namelen;
	e->id = ((uint64_t)it->hdr_block << 16) | le16(f);
	e->ino = it->hdr_ino + (uint32_t)(int32_t)(int16_t)le16(f + 2);
	e->type = le16(f + 4);
	e->cookie = (it->hdr_pos << 32) | it->pos;
	/* Names the kernel would refuse, or that would step out of the tree. */
	if (memchr(e->name, '/', namelen) || memchr(e->name, '\0', namelen) ||
	    !strcmp(e->name, ".") || !strcmp(e->name, "..") || e->type < 1 || e->type > 14)
		return -EIO;
	return 0;
}

int dir_open(struct image *img, const struct inode *dir, uint64_t cookie, struct dir_iter *it)
{
	uint64_t hdr_pos, entry_pos;
	int r;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	memset(it, 0, sizeof(*it));
	it->cur.block = dir->start;
	it->cur.offset = dir->dir_offset;
	/* The size counts "." and ".." as 3 bytes. */
	it->end = dir->size >= 3 ? dir->size - 3 : 0;
	if (it->end >= (1ull << 31))
		return -EIO;
	if (cookie < 3)
		return 0;
	hdr_pos = cookie >> 32;
	entry_pos = cookie & 0xffffffffu;
	if (hdr_pos >= entry_pos || entry_pos > it->end)
		return -EINVAL;
	if ((r = md_read(img, &it->cur, NULL, hdr_pos)) < 0)
		return r;
	it->pos = hdr_pos;
	if ((r = dir_header(img, it)) < 0)
		return r;
	while (it->pos < entry_pos) {
		if (it->left == 0)
			return -EINVAL;
		if ((r = dir_entry_read(img, it, NULL)) < 0)
			return r;
	}
	return it->pos == entry_pos ? 0 : -EINVAL;
}

int dir_next(struct image *img, struct dir_iter *it, struct dir_entry *out)
{
	int r;

	if (it->left == 0) {
		if (it->pos >= it->end)
			return 0;
		if ((r = dir_header(img, it)) < 0)
			return r;
	}
	if ((r = dir_entry_read(img, it, out)) < 0)
		return r;
	return 1;
}

int dir_lookup(struct image *img, const struct inode *dir, const char *name, uint64_t *id)
{
	struct dir_iter it;
	struct dir_entry e;
	int r;

	if (strlen(name) > NAME_MAX_LEN)
		return -ENAMETOOLONG;
	if ((r = dir_open(img, dir, 0, &it)) < 0)
		return r;
	while ((r = dir_next(img, &it, &e)) > 0) {
		int c = strcmp(name, e.name);

		if (c == 0) {
			*id = e.id;
			return 0;
		}
		/* mksquashfs sorts entries by name (so does the kernel's lookup
		 * rely on it). */
		if (c < 0)
			return -ENOENT;
	}
	return r < 0 ? r : -ENOENT;
}

/* ------------------------------------------------------------ file data */

/* Reads and caches the data block at pos with on-disk header word hdr;
 * want: the bytes it must decompress to. */
static int data_block(struct image *img, uint64_t pos, uint32_t hdr, size_t want,
		      struct cached_block **out)
{
	size_t size = hdr & ~DATA_UNCOMPRESSED, outlen = img->block_size;
	struct cached_block *b = block_cache_get(&img->data, pos);
	void *raw;
	int r;

	if (b && b->next == hdr && b->len >= want) {
		*out = b;
		return 0;
	}
	if (b)
		block_cache_release(&img->data, b);
	if (size == 0 || size > img->block_size)
		return -EIO;
	b = malloc(sizeof(*b) + img->block_size);
	if (!b)
		return -ENOMEM;
	b->key = pos;
	b->next = hdr;
	b->refs = 1;
	if (hdr & DATA_UNCOMPRESSED) {
		r = read_at(img, pos, b->data, size);
		outlen = size;
	} else if (!(raw = malloc(size))) {
		r = -ENOMEM;
	} else {
		r = read_at(img, pos, raw, size);
		if (r == 0 && (img->decompress(raw, size, b->data, &outlen) != SQFS_OK ||
			       outlen > img->block_size))
			r = -EIO;
		free(raw);
	}
	if (r == 0 && outlen < want)
		r = -EIO;
	if (r < 0) {
		free(b);
		return r;
	}
	b->len = outlen;
	*out = block_cache_put(&img->data, b);
	return 0;
}

static int reply_add(struct read_reply *r, const void *base, size_t len, void *held)
{
	if (r->n == r->cap) {
		int cap = r->cap ? r->cap * 2 : 16;
		struct iovec *iov = realloc(r->iov, (size_t)cap * sizeof(*iov));
		void **h;

		if (!iov)
			return -ENOMEM;
		r->iov = iov;
		h = realloc(r->held, (size_t)cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		r->held = h;
		r->cap = cap;
	}
	r->iov[r->n].iov_base = (void *)base;
	r->iov[r->n].iov_len = len;
	r->held[r->n] = held;
	r->n++;
	r->bytes += len;
	return 0;
}

void read_reply_done(struct image *img, struct read_reply *r)
{
	for (int i = 0; i < r->n; i++)
		if (r->held[i])
			block_cache_release(&img->data, r->held[i]);
	free(r->iov);
	free(r->held);
	memset(r, 0, sizeof(*r));
}

/* Positions the block list walk at block k of in (k < blocks). */
static int seek_block(struct image *img, const struct inode *in, uint64_t k, struct block_index *bi)
{
	unsigned char sizes[4 * 128];
	int r;

	*bi = (struct block_index){ in->id, 0, in->start, in->tail };
	pthread_mutex_lock(&img->bidx_lock);
	for (unsigned i = 0; i < BIDX_SLOTS; i++)
		if (img->bidx[i].id == in->id && img->bidx[i].k <= k && img->bidx[i].k > bi->k)
			*bi = img->bidx[i];
	pthread_mutex_unlock(&img->bidx_lock);
	while (bi->k < k) {
		uint64_t n = k - bi->k > 128 ? 128 : k - bi->k;

		if ((r = md_read(img, &bi->cur, sizes, 4 * n)) < 0)
			return r;
		for (uint64_t i = 0; i < n; i++)
			bi->pos += le32(sizes + 4 * i) & ~DATA_UNCOMPRESSED;
		bi->k += n;
	}
	return 0;
}

static void remember_block(struct image *img, const struct block_index *bi)
{
	unsigned slot = BIDX_SLOTS;

	pthread_mutex_lock(&img->bidx_lock);
	for (unsigned i = 0; i < BIDX_SLOTS; i++)
		if (img->bidx[i].id == bi->id)
			slot = i;
	if (slot == BIDX_SLOTS)
		slot = img->bidx_next++ % BIDX_SLOTS;
	img->bidx[slot] = *bi;
	pthread_mutex_unlock(&img->bidx_lock);
}

static int fragment(struct image *img, const struct inode *in, size_t tail, struct read_reply *r,
		    uint64_t from, size_t len)
{
	unsigned char e[16];
	struct cached_block *b;
	int rc;

	if ((rc = table_entry(img, img->frag_start, in->frag, 16, e)) < 0)
		return rc;
	if ((rc = data_block(img, le64(e), le32(e + 8), 0, &b)) < 0)
		return rc;
	if (in->frag_off > b->len || tail > b->len - in->frag_off) {
		block_cache_release(&img->data, b);
		return -EIO;
	}
	if ((rc = reply_add(r, b->data + in->frag_off + from, len, b)) < 0)
		block_cache_release(&img->data, b);
	return rc;
}

int file_read(struct image *img, const struct inode *in, uint64_t off, size_t size,
	      struct read_reply *r)
{
	uint64_t bs = img->block_size, end, k, first, last, nblocks, tail;
	bool has_frag;
	struct block_index bi;
	int rc;

	memset(r, 0, sizeof(*r));
	if (!S_ISREG(in->mode))
		return -EINVAL;
	if (off >= in->size || size == 0)
		return 0;
	end = in->size - off < size ? in->size : off + size;
	tail = in->size % bs;
	has_frag = in->frag != INVALID_FRAG && tail != 0;
	nblocks = in->size / bs + (!has_frag && tail ? 1 : 0);
	first = off / bs;
	last = (end - 1) / bs;

	if (first < nblocks && (rc = seek_block(img, in, first, &bi)) < 0)
		goto fail;
	for (k = first; k <= last; k++) {
		uint64_t bstart = k * bs;
		uint64_t from = off > bstart ? off - bstart : 0;
		uint64_t to = end - bstart < bs ? end - bstart : bs;
		/* Bytes this block holds: a full block, or the file's end. */
		uint64_t holds = in->size - bstart < bs ? in->size - bstart : bs;

		if (k >= nblocks) {
			if ((rc = fragment(img, in, (size_t)holds, r, from, (size_t)(to - from))) < 0)
				goto fail;
			continue;
		}
		unsigned char w[4];
		uint32_t hdr;

		if ((rc = md_read(img, &bi.cur, w, 4)) < 0)
			goto fail;
		hdr = le32(w);
		if ((hdr & ~DATA_UNCOMPRESSED) == 0) {
			rc = reply_add(r, zeros, (size_t)(to - from), NULL);
		} else {
			struct cached_block *b;

			if ((rc = data_block(img, bi.pos, hdr, (size_t)holds, &b)) < 0)
				goto fail;
			if ((rc = reply_add(r, b->data + from, (size_t)(to - from), b)) < 0)
				block_cache_release(&img->data, b);
		}
		if (rc < 0)
			goto fail;
		bi.pos += hdr & ~DATA_UNCOMPRESSED;
		bi.k = k + 1;
	}
	if (first < nblocks)
		remember_block(img, &bi);
	return 0;
fail:
	read_reply_done(img, r);
	return rc;
}

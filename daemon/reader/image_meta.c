/* squash-reader's image layer: the superblock, metadata blocks and
 * tables, inodes (image.h). */
#include "config.h"

#include "reader/image.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "reader/block_cache.h"
#include "reader/fragment_ahead.h"
#include "reader/stored_files.h"
#include "reader/image_format.h"
#include "reader/shared_data_cache.h"
#include "reader/start_profile.h"
#include "read_full.h"

/* Reads len bytes at pos, all within the image's used bytes. */
int read_at(struct image *img, uint64_t pos, void *buf, size_t len)
{
	if (pos > img->bytes_used || len > img->bytes_used - pos)
		return -EIO;
	return squash_read_full(img->fd, buf, len, pos) == (ssize_t)len ? 0 : -EIO;
}

/* ------------------------------------------------------------ metadata */

static int md_block(struct image *img, uint64_t pos, struct cached_block **out)
{
	unsigned char hdr[2 + SQUASH_METADATA_SIZE], *raw = hdr + 2;
	struct cached_block *b = block_cache_get(img->mdc, pos | img->cache_tag);
	size_t size, want, outlen = SQUASH_METADATA_SIZE;
	int r;

	if (b) {
		*out = b;
		return 0;
	}
	/* One read: the header and the largest block it can announce, cut at
	 * the end of the used bytes (a block's size is only known from its
	 * header; this saves the second pread per block). */
	if (pos >= img->bytes_used)
		return -EIO;
	want = img->bytes_used - pos < sizeof(hdr) ? (size_t)(img->bytes_used - pos) : sizeof(hdr);
	if (want < 2)
		return -EIO;
	if ((r = read_at(img, pos, hdr, want)) < 0)
		return r;
	size = le16(hdr) & 0x7fff;
	/* 0 would mean 32 KiB: more than any metadata block holds. */
	if (size == 0 || size > SQUASH_METADATA_SIZE || size > want - 2)
		return -EIO;
	b = malloc(sizeof(*b) + SQUASH_METADATA_SIZE);
	if (!b)
		return -ENOMEM;
	b->key = pos | img->cache_tag;
	b->next = pos + 2 + size;
	b->refs = 1;
	if (le16(hdr) & 0x8000) {
		memcpy(b->data, raw, size);
		outlen = size;
	} else if (block_codec_decompress(&img->codec, raw, size, b->data, &outlen) < 0 || outlen > SQUASH_METADATA_SIZE) {
		free(b);
		return -EIO;
	}
	/* An empty block would let a cursor stand still. */
	if (outlen == 0) {
		free(b);
		return -EIO;
	}
	b->len = outlen;
	*out = block_cache_put(img->mdc, b);
	return 0;
}

/* Copies len bytes from the cursor (buf NULL: skips them) and advances it. */
int md_read(struct image *img, struct md_cursor *cur, void *buf, size_t len)
{
	while (len > 0) {
		struct cached_block *b;
		size_t take;
		int r = md_block(img, cur->block, &b);

		if (r < 0)
			return r;
		if (cur->offset > b->len) {
			block_cache_release(img->mdc, b);
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
		block_cache_release(img->mdc, b);
	}
	return 0;
}

/* Entry idx of a table of fixed-size entries behind an index of block
 * pointers at table_start. */
int table_entry(struct image *img, uint64_t table_start, uint64_t idx, size_t each, void *out)
{
	unsigned char p[8];
	uint64_t byte = idx * each;
	struct md_cursor cur;
	int r;

	if ((r = read_at(img, table_start + 8 * (byte / SQUASH_METADATA_SIZE), p, 8)) < 0)
		return r;
	cur.block = le64(p);
	cur.offset = (uint32_t)(byte % SQUASH_METADATA_SIZE);
	return md_read(img, &cur, out, each);
}

/* ------------------------------------------------------------ open */

void md_prefetch_range(uint64_t inode_start, uint64_t bytes_used, uint64_t cap,
		       uint64_t *off, uint64_t *len)
{
	*off = *len = 0;
	if (inode_start >= bytes_used || bytes_used > (uint64_t)INT64_MAX)
		return;
	*off = inode_start;
	*len = bytes_used - inode_start < cap ? bytes_used - inode_start : cap;
}

/* Asks the kernel to read the image's tables into the page cache now, in
 * the background. mksquashfs writes them after the data, from the inode
 * table to the end: inodes, directories, then the fragment, export, id and
 * xattr tables. A cold walk otherwise reads them one metadata block at a
 * time, and where each cold read is a network round trip (Lustre, NFS)
 * waits for every one (on a local disk it hardly waits: docs/performance.md,
 * section 9). Capped (MD_PREFETCH_MAX): the tables
 * of an image of millions of files are hundreds of MiB, which would push
 * other users' pages out of the node's page cache for a job that may look
 * at a few files; past the cap the reads are on demand, as before. Only
 * advice: a filesystem may ignore it, and nothing depends on it. */
static void md_prefetch(struct image *img)
{
	md_prefetch_range(img->inode_start, img->bytes_used, MD_PREFETCH_MAX,
			  &img->prefetch_off, &img->prefetch_len);
	if (img->prefetch_len > 0)
		(void)posix_fadvise(img->fd, (off_t)img->prefetch_off, (off_t)img->prefetch_len,
				    POSIX_FADV_WILLNEED);
}

/* The superblock's fields the reader keeps, once squash_superblock_read
 * has checked them. */
static void image_take_superblock(struct image *img, const struct squash_superblock *sb)
{
	img->inodes = sb->inodes;
	img->block_size = sb->block_size;
	img->fragments = sb->fragments;
	img->compression = sb->compression;
	img->no_ids = sb->no_ids;
	img->root = sb->root_inode;
	img->bytes_used = sb->bytes_used;
	img->id_start = sb->id_table;
	img->inode_start = sb->inode_table;
	img->dir_start = sb->directory_table;
	img->frag_start = sb->fragment_table;
}

static int open_common(int fd, unsigned md_slots, unsigned data_slots, struct block_cache *shared_md,
		       struct block_cache *shared_data, uint64_t tag, bool bundle, bool *tag_kept,
		       struct image **out, char *err, size_t errlen);

int image_open(int fd, unsigned md_slots, unsigned data_slots, struct image **out,
	       char *err, size_t errlen)
{
	struct block_cache *shared = NULL;
	uint64_t tag = 0;
	bool kept = false;
	int r;

	/* The reader's shared data cache, unless a size of its own is asked
	 * for or every tag is taken. */
	if (data_slots == 0 && shared_data_cache_join(&shared, &tag) < 0)
		shared = NULL;
	r = open_common(fd, md_slots, data_slots, NULL, shared, shared ? tag : 0, false, &kept, out,
			err, errlen);
	/* Kept: image_close gives it back, on open's errors too. */
	if (shared && !kept)
		shared_data_cache_leave(tag);
	return r;
}

int image_open_shared(int fd, struct block_cache *md, struct block_cache *data, uint32_t tag,
		      struct image **out, char *err, size_t errlen)
{
	bool kept;

	if (tag == 0 || tag >= (1u << (64 - CACHE_TAG_SHIFT))) {
		snprintf(err, errlen, "no cache tag for this image");
		*out = NULL;
		return -EINVAL;
	}
	return open_common(fd, 1, 1, md, data, (uint64_t)tag << CACHE_TAG_SHIFT, true, &kept, out,
			   err, errlen);
}

/* bundle: one of a union's images, in caches of the union's; else a
 * single image, whose data cache may be the reader's (shared_data):
 * *tag_kept then says whether the image holds its tag (image_close gives
 * it back). */
static int open_common(int fd, unsigned md_slots, unsigned data_slots, struct block_cache *shared_md,
		       struct block_cache *shared_data, uint64_t tag, bool bundle, bool *tag_kept,
		       struct image **out, char *err, size_t errlen)
{
	uint8_t buf[SQUASH_SUPERBLOCK_SIZE];
	struct squash_superblock sb;
	struct image *img;
	struct stat st;
	ssize_t got;

	*out = NULL;
	*tag_kept = false;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot stat the image: %s", strerror(errno));
		return -errno;
	}
	got = squash_read_full(fd, buf, sizeof(buf), 0);
	if (got < 0) {
		snprintf(err, errlen, "cannot read the image: %s", strerror(errno));
		return -EIO;
	}
	if (squash_superblock_read(buf, (size_t)got, (uint64_t)st.st_size, &sb, err, errlen) < 0)
		return -EINVAL;
	img = calloc(1, sizeof(*img));
	if (!img) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	img->fd = fd;
	image_take_superblock(img, &sb);
	/* Positions must stay below the tag of a shared cache's keys. A
	 * single image that large keeps caches of its own. */
	if (tag && img->bytes_used >= (1ull << CACHE_TAG_SHIFT)) {
		if (bundle) {
			snprintf(err, errlen, "the image is too large to share caches");
			free(img);
			return -EINVAL;
		}
		shared_data = NULL;
		tag = 0;
	}
	if (block_codec_init(&img->codec, img->compression, img->block_size) < 0) {
		snprintf(err, errlen, "%s compression is not supported by this build",
			 squash_compression_name(img->compression));
		free(img);
		return -EINVAL;
	}
	md_prefetch(img);
	block_cache_init(&img->md, md_slots ? md_slots : 32);
	block_cache_init(&img->data, data_slots ? data_slots : 4);
	img->mdc = shared_md ? shared_md : &img->md;
	img->datac = shared_data ? shared_data : &img->data;
	img->cache_tag = tag;
	img->data_shared = *tag_kept = !bundle && shared_data;
	pthread_mutex_init(&img->bidx_lock, NULL);
	fragment_ahead_init(img);
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
	if (xattr_open(img, sb.xattr_table) < 0) {
		snprintf(err, errlen, "damaged xattr table");
		image_close(img);
		return -EIO;
	}
	*out = img;
	/* A single image's start profile (a union's bundles are data, not a
	 * program's start). */
	if (!bundle) {
		start_profile_learn_begin(img);
		start_profile_prefetch_begin(img);
	}
	return 0;
}

void image_close(struct image *img)
{
	if (!img)
		return;
	start_profile_walk_end(img);
	start_profile_prefetch_end(img);
	start_profile_learn_end(img);
	fragment_ahead_destroy(img);
	stored_forget(img);
	if (img->data_shared)
		shared_data_cache_leave(img->cache_tag);
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

/* ------------------------------------------------------------ inodes */

int inode_get(struct image *img, uint64_t id, struct inode *in)
{
	unsigned char b[40];
	uint16_t uid_idx, gid_idx, perm;
	int r;

	memset(in, 0, sizeof(*in));
	if ((id & 0xffff) >= SQUASH_METADATA_SIZE || (id >> 16) >= img->dir_start - img->inode_start)
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
	in->xattr = INODE_NO_XATTR;
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
		in->dir_index = le16(b + 16);
		in->dir_offset = le16(b + 18);
		in->xattr = le32(b + 20);
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
		in->sparse = le64(b + 16);
		in->nlink = le32(b + 24);
		in->frag = le32(b + 28);
		in->frag_off = le32(b + 32);
		in->xattr = le32(b + 36);
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
		if (in->type == SQUASHFS_LSYMLINK_TYPE) {
			/* Its xattr index follows the target. */
			struct md_cursor after = in->tail;

			if ((r = md_read(img, &after, NULL, in->size)) < 0 ||
			    (r = md_read(img, &after, b, 4)) < 0)
				return r;
			in->xattr = le32(b);
		}
		break;
	case SQUASHFS_BLKDEV_TYPE:
	case SQUASHFS_CHRDEV_TYPE:
	case SQUASHFS_LBLKDEV_TYPE:
	case SQUASHFS_LCHRDEV_TYPE:
		if ((r = md_read(img, &in->tail, b, in->type >= SQUASHFS_LBLKDEV_TYPE ? 12 : 8)) < 0)
			return r;
		if (in->type >= SQUASHFS_LBLKDEV_TYPE)
			in->xattr = le32(b + 8);
		in->mode = in->type == SQUASHFS_BLKDEV_TYPE || in->type == SQUASHFS_LBLKDEV_TYPE
				   ? S_IFBLK : S_IFCHR;
		in->nlink = le32(b);
		in->rdev = le32(b + 4);
		break;
	case SQUASHFS_FIFO_TYPE:
	case SQUASHFS_SOCKET_TYPE:
	case SQUASHFS_LFIFO_TYPE:
	case SQUASHFS_LSOCKET_TYPE:
		if ((r = md_read(img, &in->tail, b, in->type >= SQUASHFS_LFIFO_TYPE ? 8 : 4)) < 0)
			return r;
		if (in->type >= SQUASHFS_LFIFO_TYPE)
			in->xattr = le32(b + 4);
		in->mode = in->type == SQUASHFS_FIFO_TYPE || in->type == SQUASHFS_LFIFO_TYPE
				   ? S_IFIFO : S_IFSOCK;
		in->nlink = le32(b);
		break;
	default:
		return -EIO;
	}
	in->mode |= perm;
	if (S_ISDIR(in->mode)) {
		if (in->dir_offset >= SQUASH_METADATA_SIZE || in->start >= img->bytes_used - img->dir_start)
			return -EIO;
		in->start += img->dir_start;
	}
	if (S_ISREG(in->mode) && in->frag != INVALID_FRAG && in->frag >= img->fragments)
		return -EIO;
	/* Looked up now, as the kernel does when it reads an inode: a bad
	 * index fails the inode there too. */
	return xattr_size_of(img, in, &in->xattr_size);
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
	/* As the kernel's squashfs counts them: the bytes a file stores (its
	 * sparse blocks left out, unsigned arithmetic like fs/squashfs/inode.c),
	 * none for the other types, and for every type its xattr list's size
	 * rounded up to 512-byte blocks. */
	st->st_blocks = S_ISREG(in->mode) ? (blkcnt_t)((in->size - in->sparse + 511) >> 9) : 0;
	if (in->xattr_size > 0)
		st->st_blocks += (blkcnt_t)((in->xattr_size - 1) >> 9) + 1;
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

/* The squashfs image as squash-reader reads it: superblock, metadata
 * (inodes, directories, fragment and id tables) and file data, with the
 * shared block caches (block_cache.h). Thread-safe.
 *
 * The image is hostile (a user's own file): every offset, size and count
 * read from it is checked before use, and anything inconsistent is -EIO
 * for that request only. libsquashfuse 0.1.x trusts such values (its
 * sqfs_md_read underflows on a metadata offset past the block, its tables
 * index without bounds), so only some of its decoders are used here
 * (block_codec.h). */
#ifndef SQUASH_READER_IMAGE_H
#define SQUASH_READER_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

struct image;

/* Inode types as squashfs stores them (the L* ones carry more fields). */
enum {
	SQUASHFS_DIR_TYPE = 1, SQUASHFS_REG_TYPE, SQUASHFS_SYMLINK_TYPE, SQUASHFS_BLKDEV_TYPE,
	SQUASHFS_CHRDEV_TYPE, SQUASHFS_FIFO_TYPE, SQUASHFS_SOCKET_TYPE, SQUASHFS_LDIR_TYPE,
	SQUASHFS_LREG_TYPE, SQUASHFS_LSYMLINK_TYPE, SQUASHFS_LBLKDEV_TYPE, SQUASHFS_LCHRDEV_TYPE,
	SQUASHFS_LFIFO_TYPE, SQUASHFS_LSOCKET_TYPE,
};

/* A position in a metadata table: the block's position in the image and
 * the offset in its decompressed data. */
struct md_cursor {
	uint64_t block;
	uint32_t offset;
};

struct inode {
	uint64_t id;       /* inode reference: metadata block << 16 | offset */
	unsigned type;     /* SQUASHFS_*_TYPE */
	mode_t mode;       /* with the file type bits */
	uid_t uid;
	gid_t gid;
	uint32_t mtime;
	uint32_t ino;      /* inode number */
	uint32_t nlink;
	uint64_t size;     /* file: bytes; directory: listing bytes; symlink: target bytes */
	uint64_t sparse;   /* file (extended inode): bytes of its sparse blocks */
	uint32_t rdev;     /* devices: squashfs encoding */
	uint64_t start;    /* file: first data block; directory: listing's metadata block */
	uint32_t frag;     /* file: fragment index or SQUASHFS_INVALID_FRAG */
	uint32_t frag_off;
	uint16_t dir_offset;
	uint32_t parent;   /* directory: its parent's inode number */
	uint32_t xattr;    /* index in the xattr id table, or INODE_NO_XATTR */
	uint32_t xattr_size; /* bytes of its xattr list (the id table's), 0 without */
	uint16_t dir_index; /* large directory: entries of its index (at tail) */
	struct md_cursor tail; /* block list (files), target (symlinks), index (large directories) */
};

#define INODE_NO_XATTR 0xffffffffu

/* Directory entries. A cookie names the position after an entry; it is
 * what READDIR offsets carry (0, 1 and 2 are the start, "." and ".."). */
struct dir_iter {
	struct md_cursor cur;
	uint64_t pos, end;   /* listing bytes read, listing length */
	uint64_t hdr_pos;    /* listing position of the current header */
	unsigned left;       /* entries left under the current header */
	uint32_t hdr_block;  /* the header's inode metadata block */
	uint32_t hdr_ino;
};

struct dir_entry {
	char name[257];
	size_t namelen;
	uint64_t id;
	unsigned type;
	uint32_t ino;
	uint64_t cookie;
};

/* Holds the blocks an answer to READ points into. */
struct read_reply {
	struct iovec *iov;
	void **held;
	int n, cap;
	size_t bytes;
};

/* Opens the image on fd (kept open; the caller closes it after
 * image_close). slots: metadata and data cache sizes; md_slots 0: the
 * default, data_slots 0: the reader's shared data cache
 * (shared_data_cache.h). */
int image_open(int fd, unsigned md_slots, unsigned data_slots, struct image **out,
	       char *err, size_t errlen);
void image_close(struct image *img);

/* The same, with the block caches md and data (which must outlive the
 * image) shared with other images: a union's (union_tree.h), so that
 * 1,024 images do not keep 1,024 caches. tag tells this image's blocks
 * from the others' (1..8191, different for each image sharing them). */
struct block_cache;
int image_open_shared(int fd, struct block_cache *md, struct block_cache *data, uint32_t tag,
		      struct image **out, char *err, size_t errlen);

uint64_t image_root(const struct image *img);
void image_statfs(const struct image *img, struct statvfs *st);

/* All return 0 or -errno (-EIO for anything the image gets wrong). */
int inode_get(struct image *img, uint64_t id, struct inode *out);
void inode_stat(const struct inode *in, struct stat *st);
int inode_readlink(struct image *img, const struct inode *in, char *buf, size_t buflen);

int dir_open(struct image *img, const struct inode *dir, uint64_t cookie, struct dir_iter *it);
/* 1: *out filled; 0: no more entries; -errno. */
int dir_next(struct image *img, struct dir_iter *it, struct dir_entry *out);
/* The file type (S_IFDIR, ...) of a directory entry's squashfs type. */
mode_t dir_entry_mode(unsigned type);
/* 0 and *id, -ENOENT, or -errno. */
int dir_lookup(struct image *img, const struct inode *dir, const char *name, uint64_t *id);

/* Extended attributes, with the kernel's squashfs semantics: the names
 * "user.", "trusted." and "security." plus the stored name, in the image's
 * order. xattr_list writes the NUL-terminated names (trusted.* only when
 * with_trusted) into buf when size > 0 and returns their total length;
 * -ERANGE when size > 0 is too small, -E2BIG past XATTR_LIST_MAX.
 * xattr_get returns the value's length and copies it into buf when size >
 * 0; -ERANGE when it does not fit, -ENODATA when the inode has no such
 * attribute, -EOPNOTSUPP for a name of another namespace. */
/* The size the xattr id table gives in's list (0 without xattrs), which
 * the kernel counts into st_blocks; -EIO for a bad index. */
int xattr_size_of(struct image *img, const struct inode *in, uint32_t *size);
int xattr_list(struct image *img, const struct inode *in, bool with_trusted, char *buf,
	       size_t size);
int xattr_get(struct image *img, const struct inode *in, const char *name, void *buf,
	      size_t size);

/* The parts of the image that hold bytes [from, to) of the file in: its
 * data blocks (one part: a file's blocks lie together) and its fragment's
 * block, each given to part(ctx, offset, length) once. 0 or -errno. */
int file_extents(struct image *img, const struct inode *in, uint64_t from, uint64_t to,
		 void (*part)(void *ctx, uint64_t off, uint64_t len), void *ctx);

/* Records which bytes of which files are read from now on into rec
 * (start_profile.h; NULL: stops). Set before the image is served. */
struct profile_recorder;
void image_record_profile(struct image *img, struct profile_recorder *rec);

/* Fills r with up to size bytes of the file from off (fewer at its end). */
int file_read(struct image *img, const struct inode *in, uint64_t off, size_t size,
	      struct read_reply *r);
void read_reply_done(struct image *img, struct read_reply *r);

/* Work a serving thread can do for later reads once it has answered: the
 * read-ahead of the image from the last block read (image_data.c), the
 * next fragment block of a reader going through them in order
 * (fragment_ahead.c), the block after next of a file read from start to
 * end (data_ahead.c). Returns at once when there is none. */
void image_work_ahead(struct image *img);

#endif

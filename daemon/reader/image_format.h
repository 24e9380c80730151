/* What the parts of squash-reader's image layer (image.h) share
 * (image_meta.c: the superblock, metadata and inodes; image_dir.c:
 * directories; image_data.c: file data): the open image, the reader's
 * limits and the checked readers. The format itself (byte order, the
 * superblock, its limits) is proto/squashfs_format.h, shared with squashd
 * and the plugin. Not for the rest of the reader, which uses image.h. */
#ifndef SQUASH_READER_IMAGE_FORMAT_H
#define SQUASH_READER_IMAGE_FORMAT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reader/block_cache.h"
#include "reader/block_codec.h"
#include "reader/image.h"
#include "squashfs_format.h"

#define NAME_MAX_LEN 256u
#define DIR_MAX_ENTRIES 256u     /* per directory header */
#define SYMLINK_MAX 4095u
#define INVALID_FRAG 0xffffffffu
#define DATA_UNCOMPRESSED (1u << 24)
#define BIDX_SLOTS 16
#define CACHE_TAG_SHIFT 51
/* The most of the metadata region (image_meta.c, md_prefetch_range) the
 * reader asks the kernel to read ahead when it opens an image. */
#define MD_PREFETCH_MAX (64ull << 20)
/* How much of the image the reader asks the kernel to read ahead of a data
 * block or fragment it reads (image_data.c, read_ahead), in calls of
 * DATA_READAHEAD_CHUNK at multiples of it. */
#define DATA_READAHEAD_MAX (2ull << 20)
#define DATA_READAHEAD_CHUNK (128ull << 10)

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
	/* xattrs (image_xattr.c): the table of names and values, the index
	 * of the id table's blocks and its entries; xattr_ids 0: none. */
	uint64_t xattr_start, xattr_index;
	uint32_t xattr_ids;
	bool xattr_table;    /* the image has an xattr table at all */
	uint32_t *ids;
	struct block_codec codec;
	/* The caches blocks go through: md and data, its own, or caches a
	 * union's images share (image_open_shared), or for a single image's
	 * data the reader's (data_shared, shared_data_cache.h); in a shared
	 * cache keys are positions with cache_tag (the image's) in the bits
	 * above CACHE_TAG_SHIFT. */
	struct block_cache md, data;
	struct block_cache *mdc, *datac;
	uint64_t cache_tag;
	bool data_shared;
	pthread_mutex_t bidx_lock;
	struct block_index bidx[BIDX_SLOTS];
	unsigned bidx_next;
	uint64_t prefetch_off, prefetch_len; /* what image_open asked to read ahead */
	/* Where the data read ahead (image_data.c, read_ahead) last asked up
	 * to; only advice, so threads may race on it. */
	_Atomic uint64_t advised_to;
	/* The position of the last block read, plus one, for read_ahead to
	 * start from once the request is answered; 0: none. */
	_Atomic uint64_t advise_from;
	/* Small files stored into the page cache (neighbour_push.c): the
	 * inode after the last one read or stored, and whether a thread is
	 * storing. */
	_Atomic uint64_t push_next;
	atomic_bool pushing;
	/* Inode numbers whose small file was stored or read whole, a bit
	 * each, mapped at the first (neighbour_push.c): a file the kernel
	 * has pages of is not stored again at its next open. */
	_Atomic(_Atomic uint64_t *) stored;
	/* The start profile (start_profile.h): read ahead by a thread while
	 * prefetching; recorded into recorder when one is set. */
	pthread_t prefetch_thread;
	bool prefetching;
	atomic_bool prefetch_stop;
	/* And walked through the mount (start_profile_walk.c; NULL: not). */
	struct walk *walk;
	struct profile_recorder *recorder;
	/* recorder is --record-profile's: only what the start reads, so no
	 * pushes (neighbour_push.c) nor walk; else it is a learning's
	 * (start_profile_learn.c, NULL: none), which keeps them. */
	bool record_exact;
	struct learn *learn;
	/* Fragment blocks decompressed ahead (fragment_ahead.c): the block
	 * the last read went to, the one asked for, the one being
	 * decompressed and the one decompressed (INVALID_FRAG: none), which
	 * waits in a cache of one slot of its own (so the idle sweep sees
	 * it, block_cache.h). */
	pthread_mutex_t ahead_lock;
	pthread_cond_t ahead_done;
	uint32_t ahead_last, ahead_want, ahead_busy, ahead_idx;
	struct block_cache ahead_held;
	/* A large file's data blocks decompressed ahead (data_ahead.c), under
	 * ahead_lock: the file (its inode reference + 1; 0: none) and the
	 * block its last read ended before; the
	 * block asked for (position, header word, bytes; position 0: none);
	 * the cache key of the one being decompressed (0: none). */
	uint64_t data_last_file, data_last_next;
	uint64_t data_want_pos, data_busy_key;
	uint32_t data_want_hdr;
	size_t data_want_len;
};

/* Reads the xattr id table's header at the superblock's xattr_id_start
 * (SQUASH_TABLE_ABSENT: no xattrs). 0, or -EIO for a table the image gets wrong
 * (the kernel refuses to mount those). */
int xattr_open(struct image *img, uint64_t xattr_id_start);

/* The part of an image to read ahead at open: its tables, from the inode
 * table to the end of the used bytes, at most cap bytes from the start of
 * the inode table. *len 0: nothing (a range the values do not make). */
void md_prefetch_range(uint64_t inode_start, uint64_t bytes_used, uint64_t cap,
		       uint64_t *off, uint64_t *len);
/* Reads and decompresses the data block at pos (on-disk header word hdr),
 * which must give at least want bytes, into a new block of its own (one
 * reference, not cached). 0 or -errno. */
int data_block_decompress(struct image *img, uint64_t pos, uint32_t hdr, size_t want,
			  struct cached_block **out);
/* Reads len bytes at pos, all within the image's used bytes. */
int read_at(struct image *img, uint64_t pos, void *buf, size_t len);
/* Copies len bytes from the cursor (buf NULL: skips them) and advances it. */
int md_read(struct image *img, struct md_cursor *cur, void *buf, size_t len);
/* Entry idx of a table of fixed-size entries behind an index of block
 * pointers at table_start. */
int table_entry(struct image *img, uint64_t table_start, uint64_t idx, size_t each, void *out);

#endif

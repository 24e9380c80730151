/* The parts of squash-reader's union (union_tree.h) that union_tree.c
 * (nodes, lookups, listings served) and union_merge.c (a merged
 * directory's listing made from its layers') share. Not for the rest of
 * the reader. */
#ifndef SQUASH_READER_UNION_INTERNAL_H
#define SQUASH_READER_UNION_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "reader/image.h"

/* Merged directories live in chunks of 256 << k entries, so that the
 * table grows without moving what other threads are reading. */
#define CHUNK0_BITS 8
#define CHUNKS 24

/* Bounds on one merged directory, whatever the images claim: entries
 * (uint32_t indexes, 40 bytes each) and the bytes of their names. */
#define CHILD_MAX (1u << 24)
#define NAMES_MAX (1u << 30)

struct layer_dir {
	uint32_t layer;
	uint64_t ref;
};

enum {
	C_HIDDEN = 1,          /* a whiteout: the name is gone from here down */
	C_STOPPED = 2,         /* nothing below merges into it */
	C_OPAQUE_CHECKED = 4,  /* its lowest directory so far is not opaque */
};

/* One name of a merged directory. */
struct child {
	uint64_t ref;          /* the topmost entry's inode reference */
	uint32_t name_off;
	uint32_t ino;          /* the topmost entry's inode number */
	uint32_t lower_off;    /* its lower directories: listing->lowers[lower_off..] */
	uint32_t nlower;       /* directories merged below the topmost one (0: none) */
	_Atomic uint32_t merged; /* its merged directory's index + 1, once made */
	uint16_t layer;
	uint16_t namelen;
	uint8_t type;          /* SQUASHFS_*_TYPE of the topmost entry */
	uint8_t flags;
};

struct listing {
	uint32_t n;
	struct child *child;   /* topmost layer's names first, as overlayfs lists them */
	char *names;
	struct layer_dir *lowers;
	uint32_t *hash;        /* child index + 1; 0: empty */
	uint32_t hmask;
};

struct mdir {
	uint32_t nlayers;
	struct layer_dir *layers;            /* topmost first */
	_Atomic(struct listing *) list;      /* made on first use */
};

struct union_fs {
	uint32_t n;
	struct image **img;
	pthread_mutex_t lock;                /* making merged directories */
	_Atomic uint32_t ndirs;
	_Atomic(struct mdir *) chunk[CHUNKS];
};

static inline bool is_dir_type(unsigned t)
{
	return t == SQUASHFS_DIR_TYPE || t == SQUASHFS_LDIR_TYPE;
}

static inline bool is_chr_type(unsigned t)
{
	return t == SQUASHFS_CHRDEV_TYPE || t == SQUASHFS_LCHRDEV_TYPE;
}

/* The slot of name in l's hash: its entry, or the empty slot it would take. */
uint32_t *hash_slot(const struct listing *l, const char *name, size_t len);

/* Makes d's listing from its layers' own listings (union_merge.c). */
int listing_make(struct union_fs *u, const struct mdir *d, struct listing **out);
void listing_free(struct listing *l);

#endif

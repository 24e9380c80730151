/* What squash-reader's FUSE operations (ops.c) ask of the tree a mount
 * serves: one image (image_tree.c) or a union of images (union_tree.h,
 * union_reader.c). The requests are answered once, in ops.c; a kind only
 * says what a node id stands for, how an entry is found and listed, and
 * what its attributes are. No FUSE types here: the union is also built
 * without libfuse (tests/fuzz). */
#ifndef SQUASH_READER_TREE_H
#define SQUASH_READER_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "reader/image.h"

struct reader;

/* What a node is: the inode whose attributes it shows and the image that
 * holds it (reads, link targets and xattrs come from there); for a union,
 * where it sits in the union. */
struct tree_node {
	struct image *img;
	struct inode in;
	uint32_t layer;      /* union: img's layer (one image: 0) */
	bool merged;         /* union: a merged directory (in: its topmost one) */
	uint32_t dir;        /* merged directory: its index */
	uint32_t nlayers;    /* merged directory: the directories it merges */
};

/* What a listing fills in besides names and types: nothing (READDIR), the
 * node and n of every entry (READDIRPLUS), or of directories only
 * (READDIRPLUS with the other entries sent unlinked, plus_policy.h). */
enum tree_plus { TREE_PLUS_NONE, TREE_PLUS_ALL, TREE_PLUS_DIRS };

static inline bool tree_plus_wants(enum tree_plus plus, mode_t type)
{
	return plus == TREE_PLUS_ALL || (plus == TREE_PLUS_DIRS && S_ISDIR(type));
}

/* One entry of a listing. node and n are filled as plus asks (node 0:
 * not filled). */
struct tree_dirent {
	const char *name;
	uint64_t cookie;     /* the position after this entry (> 2) */
	mode_t type;         /* S_IF* of the entry */
	uint64_t ino;        /* st_ino */
	uint64_t node;
	struct tree_node n;
};

/* Called for each entry of a listing until it returns non-zero. */
typedef int (*tree_emit_fn)(void *ctx, const struct tree_dirent *e);

/* All return 0 or -errno (-EIO for what an image gets wrong). */
struct tree_kind {
	/* What node id node stands for. */
	int (*node_get)(struct reader *rd, uint64_t node, struct tree_node *out);
	/* The entry name in directory parent: its node id and what it is;
	 * -ENOENT when absent. */
	int (*lookup)(struct reader *rd, uint64_t parent, const char *name, uint64_t *node,
		      struct tree_node *out);
	void (*stat)(const struct tree_node *n, struct stat *st);
	/* The inode number a listing of dir gives "..". */
	uint64_t (*dotdot_ino)(const struct tree_node *dir);
	/* Calls emit for the entries of directory dir after cookie (0: from
	 * the start; "." and ".." are ops.c's). Entries emitted before an
	 * error stay emitted. */
	int (*list)(struct reader *rd, const struct tree_node *dir, uint64_t cookie,
		    enum tree_plus plus, tree_emit_fn emit, void *ctx);
	/* Same contract as xattr_list and xattr_get (image.h). */
	int (*xattr_list)(const struct tree_node *n, bool with_trusted, char *buf, size_t size);
	int (*xattr_get)(const struct tree_node *n, const char *name, void *buf, size_t size);
	void (*statfs)(struct reader *rd, struct statvfs *st);
};

extern const struct tree_kind image_tree;
/* The FUSE node id of inode reference id in a single image's tree. */
uint64_t image_node_of(const struct image *img, uint64_t id);
extern const struct tree_kind union_tree;

#endif

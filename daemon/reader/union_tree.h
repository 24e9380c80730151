/* A union of squashfs images served as one tree (squash-reader --union,
 * or a SERVE_UNION request from squashd): the merge of an ordered list of
 * images, later over earlier, as the kernel's overlayfs shows the same
 * images as lower layers (docs/architecture.md, "A union of bundles"):
 *
 * - directories at the same path merge; a non-directory hides whatever
 *   is at its path below it, and a directory hides a non-directory below;
 * - a whiteout (character device 0/0) hides the name in the layers below
 *   and is itself never shown; a directory with the xattr
 *   trusted.overlay.opaque = "y" hides the directories below it;
 * - a merged directory shows its topmost directory's attributes with
 *   nlink 1, as overlayfs does; trusted.overlay.* xattrs are not shown.
 *
 * A merged directory's entries are computed once, on first use, from the
 * layers' own listings into a table by name (which layer holds each name,
 * and for a directory in several layers which ones), so a lookup is one
 * hash probe whatever the number of layers. A name held by one layer only
 * is served straight from that layer, and so is all below it: node ids of
 * such entries are (inode reference, layer), and only merged directories
 * take a table entry (kept for the life of the mount; FORGET has nothing
 * to do). Thread-safe. */
#ifndef SQUASH_READER_UNION_TREE_H
#define SQUASH_READER_UNION_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "reader/image.h"
#include "reader/tree.h"

/* Node ids of layer entries carry the layer in 12 bits (and the inode
 * reference, 48 bits, above it); 4,096 is well past the 1,024 images a
 * job may have. */
#define UNION_MAX_LAYERS 4096u

struct union_fs;

/* Opens the union of imgs[0..n) (imgs[n-1] on top); the images stay the
 * caller's and must outlive it. 0 or -errno with err set. */
int union_open(struct image **imgs, uint32_t n, struct union_fs **out, char *err, size_t errlen);
void union_close(struct union_fs *u);

/* The kind of tree a union is (tree.h) is made of these, over the
 * union's nodes (what a tree_node is: its layer, and whether a merged
 * directory). All return 0 or -errno (-EIO for what an image gets wrong). */
int union_node_get(struct union_fs *u, uint64_t node, struct tree_node *out);
void union_stat(const struct tree_node *n, struct stat *st);

/* The entry name in directory parent: its node id and what it is;
 * -ENOENT when absent (or whited out). */
int union_lookup(struct union_fs *u, uint64_t parent, const char *name, uint64_t *node,
		 struct tree_node *child);

/* Calls emit for the entries of directory dir (a node of u) after cookie
 * (0: from the start; "." and ".." are the caller's) until it returns
 * non-zero or the listing ends; node and n of each as plus asks. Entries
 * emitted before an error stay emitted. */
int union_readdir(struct union_fs *u, const struct tree_node *dir, uint64_t cookie,
		  enum tree_plus plus, tree_emit_fn emit, void *ctx);

/* Extended attributes as overlayfs shows them: those of the node's inode
 * (the topmost directory's for a merged one) without trusted.overlay.*.
 * Same contract as xattr_list and xattr_get (image.h). */
int union_xattr_list(const struct tree_node *n, bool with_trusted, char *buf, size_t size);
int union_xattr_get(const struct tree_node *n, const char *name, void *buf, size_t size);

/* The sizes of all layers together; names as the top layer's. */
void union_statfs(const struct union_fs *u, struct statvfs *st);

#endif

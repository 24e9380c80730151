/* squash-reader's answers to FUSE requests (libfuse low-level API), one
 * set for a single image and for a union of images (tree.h says what
 * each kind of tree provides).
 *
 * What makes it fast is what it lets the kernel stop asking: READDIRPLUS
 * answers a directory's entries with their attributes (no LOOKUP per name
 * on a walk; --plus dirs|auto send files unlinked, plus_policy.h); OPEN
 * and OPENDIR are declined where the kernel supports zero-message opens
 * (no OPEN/RELEASE pair per file, and the kernel then keeps the page cache
 * and caches directory listings); entries, negative entries, attributes
 * and symlink targets are cached for ever (the images never change). Extended attributes are served as the kernel's squashfs
 * serves them (image_xattr.c): the kernel asks for security.capability
 * once per exec, nothing on reads. */
#ifndef SQUASH_READER_OPS_H
#define SQUASH_READER_OPS_H

#include <stdbool.h>

#include "reader/block_cache.h"
#include "reader/image.h"
#include "reader/plus_policy.h"

#include "reader/fuse_api.h"

struct union_fs;

/* What a session serves: one image (img, image_tree.c), or a union of
 * images (u, with its images in layers; union_reader.c). */
struct reader {
	struct image *img;
	struct union_fs *u;
	struct image **layers;
	struct block_cache *caches; /* a union's: metadata, data (shared by its images) */
	int *layer_fds;
	unsigned nlayers;
	bool no_open;    /* the kernel supports zero-message opens */
	bool no_opendir;
	struct plus_policy plus; /* which READDIRPLUS entries go linked */
	/* The session, and whether it may store small files into the page
	 * cache ahead of reads (neighbour_push.h: not single-threaded). */
	struct fuse_session *se;
	bool push;
};

/* One set of answers for every mount, over the tree it serves (tree.h):
 * one image or a union of images. */
extern const struct fuse_lowlevel_ops reader_ops;

/* Opens the union of the images on fds[0..n) (the last on top) into rd
 * (union_reader.c); the descriptors are rd's from then on, also on
 * failure (closed by reader_union_close). 0, or -errno with err set. */
int reader_union_open(struct reader *rd, int *fds, unsigned n, char *err, size_t errlen);
void reader_union_close(struct reader *rd);

/* FUSE_INIT flags the reader asks for (also what a resumed reader
 * pretends the kernel offered, session.c). */
void reader_negotiate(struct reader *rd, struct fuse_conn_info *conn);

#endif

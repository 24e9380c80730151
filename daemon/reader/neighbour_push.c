/* The small files after the one a READ asks for, stored into the kernel's
 * page cache before the READ is answered (neighbour_push.h). */
#include "config.h"

#include "reader/neighbour_push.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "reader/fuse_api.h"
#include "reader/image_format.h"
#include "reader/stored_files.h"
#include "reader/tree.h"

/* A file whose bytes all lie in a fragment block (no data blocks), so its
 * inode ends where its block list would start. */
static bool fragment_only(const struct image *img, const struct inode *in)
{
	return S_ISREG(in->mode) && in->frag != INVALID_FRAG && in->size > 0 &&
	       in->size < img->block_size;
}

/* Block list entries a scan steps over to go past a file with data
 * blocks (a few words; more: the scan ends there). */
#define SKIP_BLOCKS_MAX 64

/* The reference of the inode after in in the inode table: 0, or -1 where
 * finding it would read more than a few words (a large file's block list,
 * a large directory's index). */
static int inode_after(struct image *img, const struct inode *in, uint64_t *next)
{
	struct md_cursor cur = in->tail;
	uint64_t skip = 0;

	switch (in->type) {
	case SQUASHFS_REG_TYPE:
	case SQUASHFS_LREG_TYPE:
		skip = in->size / img->block_size +
		       (in->frag == INVALID_FRAG && in->size % img->block_size ? 1 : 0);
		if (skip > SKIP_BLOCKS_MAX)
			return -1;
		skip *= 4;
		break;
	case SQUASHFS_LDIR_TYPE:
		if (in->dir_index)
			return -1;
		break;
	case SQUASHFS_SYMLINK_TYPE:
		skip = in->size;
		break;
	case SQUASHFS_LSYMLINK_TYPE:
		skip = in->size + 4; /* and its xattr index */
		break;
	default:
		break; /* the rest end where inode_get stopped reading */
	}
	if (skip && md_read(img, &cur, NULL, (size_t)skip) < 0)
		return -1;
	*next = (cur.block - img->inode_start) << 16 | cur.offset;
	return 0;
}

/* A request waits on the connection: it may be a READ of a file this
 * would store, whose pages the kernel holds until it is answered. */
static bool requests_wait(struct fuse_session *se)
{
	struct pollfd p = { .fd = fuse_session_fd(se), .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

/* Stores file's bytes into its page cache; 0 or -errno (-ENOENT: the
 * kernel has no inode for it, it was never listed or looked up). */
static int store(struct fuse_session *se, struct image *img, const struct inode *file)
{
	struct read_reply r;
	uint64_t off = 0;
	int rc = file_read(img, file, 0, (size_t)file->size, &r);

	if (rc < 0)
		return rc;
	if (r.bytes != file->size)
		rc = -EIO;
	for (int i = 0; rc == 0 && i < r.n; i++) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(r.iov[i].iov_len);

		bv.buf[0].mem = r.iov[i].iov_base;
		rc = fuse_lowlevel_notify_store(se, image_node_of(img, file->id), (off_t)off, &bv, 0);
		off += r.iov[i].iov_len;
	}
	read_reply_done(img, &r);
	return rc;
}

unsigned neighbour_push(struct fuse_session *se, struct image *img, const struct inode *file)
{
	uint64_t next, expected;
	unsigned stored = 0;
	struct inode in;

	if (!fragment_only(img, file) || img->record_exact || inode_after(img, file, &next) < 0)
		return 0;
	expected = atomic_exchange_explicit(&img->push_next, next, memory_order_relaxed);
	/* The first READ of a run, or a jump: nothing to go on. */
	if (expected != file->id || atomic_exchange(&img->pushing, true))
		return 0;
	/* The inodes after it, other kinds (directories, links) stepped over,
	 * for as long as their bytes lie in its fragment block. */
	for (unsigned i = 0; i < NEIGHBOUR_PUSH_SCAN; i++) {
		if (inode_get(img, next, &in) < 0)
			break;
		if (S_ISREG(in.mode) && in.frag != file->frag && in.size > 0)
			break;
		if (fragment_only(img, &in)) {
			if (requests_wait(se) || store(se, img, &in) < 0)
				break;
			stored_test_and_set(img, &in);
			stored++;
		}
		if (inode_after(img, &in, &next) < 0)
			break;
		atomic_store_explicit(&img->push_next, next, memory_order_relaxed);
	}
	atomic_store(&img->pushing, false);
	return stored;
}

unsigned open_push(struct fuse_session *se, struct image *img, const struct inode *file)
{
	unsigned stored = 0;

	if (!fragment_only(img, file) || img->record_exact || requests_wait(se) ||
	    atomic_load_explicit(&img->pushing, memory_order_relaxed) || stored_test_and_set(img, file))
		return 0;
	if (atomic_exchange(&img->pushing, true))
		return 0;
	stored = store(se, img, file) == 0;
	atomic_store(&img->pushing, false);
	return stored;
}

/* squash-reader's image layer: file data, blocks and fragments, answered
 * from the data cache (image.h). */
#include "config.h"

#include "reader/image.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reader/block_cache.h"
#include "reader/data_ahead.h"
#include "reader/fragment_ahead.h"
#include "reader/image_format.h"
#include "reader/start_profile.h"

/* Never written: the data of sparse blocks. */
static unsigned char zeros[SQUASH_BLOCK_SIZE_MAX];

/* Asks the kernel to read the image from pos on, DATA_READAHEAD_MAX bytes,
 * in the background, once the request that read the block at pos is
 * answered (image_work_ahead): the kernel allocates and looks up every page
 * of the range in the call, which was a sixth of a cold import's time in
 * requests when it came before the block's own read (docs/performance.md,
 * section 31), while the block itself is one read either way. Where the image
 * lies on a network filesystem (Lustre, GPFS, NFS) each cold read is a
 * round trip, and the blocks a reader needs next mostly follow in the
 * image (mksquashfs writes files and fragments in directory order). One
 * call per DATA_READAHEAD_CHUNK, at multiples of it, as the kernel reads
 * at most its readahead size (128 KiB on FUSE) per call: the requests are
 * then in flight together (docs/performance.md, section 15: a cold import
 * at 2 ms per request 6.5 s -> 4.7 s), each a whole chunk. A reader going
 * on through the image asks only for the chunks past those it asked for
 * already (advised_to), a call per chunk it enters: a cold md5sum of a
 * stack asks the image for a third of the reads it did, and 2 MiB ahead
 * rather than 512 KiB hides more of a slow file system's latency (at
 * 2 ms per request a cold import 0.95x; section 21). Only advice, into
 * the page cache, not the reader's memory; nothing depends on it. */
static void read_ahead(struct image *img, uint64_t pos)
{
	uint64_t end = pos + DATA_READAHEAD_MAX < img->bytes_used ? pos + DATA_READAHEAD_MAX
								    : img->bytes_used;
	uint64_t from = atomic_load_explicit(&img->advised_to, memory_order_relaxed);

	/* Elsewhere in the image (another file, or back): from pos's chunk. */
	if (from < pos || from > end)
		from = pos & ~(DATA_READAHEAD_CHUNK - 1);
	if (end < img->bytes_used)
		end &= ~(DATA_READAHEAD_CHUNK - 1);
	if (from >= end)
		return;
	atomic_store_explicit(&img->advised_to, end, memory_order_relaxed);
	for (uint64_t at = from; at < end; at += DATA_READAHEAD_CHUNK)
		(void)posix_fadvise(img->fd, (off_t)at, (off_t)DATA_READAHEAD_CHUNK, POSIX_FADV_WILLNEED);
}

int data_block_decompress(struct image *img, uint64_t pos, uint32_t hdr, size_t want,
			  struct cached_block **out)
{
	size_t size = hdr & ~DATA_UNCOMPRESSED, outlen = img->block_size;
	struct cached_block *b;
	void *raw;
	int r;

	if (size == 0 || size > img->block_size)
		return -EIO;
	b = malloc(sizeof(*b) + img->block_size);
	if (!b)
		return -ENOMEM;
	b->key = pos | img->cache_tag;
	b->next = hdr;
	b->refs = 1;
	atomic_store_explicit(&img->advise_from, pos + 1, memory_order_relaxed);
	if (hdr & DATA_UNCOMPRESSED) {
		r = read_at(img, pos, b->data, size);
		outlen = size;
	} else if (!(raw = malloc(size))) {
		r = -ENOMEM;
	} else {
		r = read_at(img, pos, raw, size);
		if (r == 0 && (block_codec_decompress(&img->codec, raw, size, b->data, &outlen) < 0 ||
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
	*out = b;
	return 0;
}

/* The data block at pos with on-disk header word hdr, from the cache or
 * read into it; want: the bytes it must decompress to. */
static int data_block(struct image *img, uint64_t pos, uint32_t hdr, size_t want,
		      struct cached_block **out)
{
	struct cached_block *b = block_cache_get(img->datac, pos | img->cache_tag);
	int r;

	if (b && b->next == hdr && b->len >= want) {
		*out = b;
		return 0;
	}
	if (b)
		block_cache_release(img->datac, b);
	/* Being decompressed ahead: it is in the cache once that is done. */
	if (data_ahead_wait(img, pos | img->cache_tag) &&
	    (b = block_cache_get(img->datac, pos | img->cache_tag))) {
		if (b->next == hdr && b->len >= want) {
			*out = b;
			return 0;
		}
		block_cache_release(img->datac, b);
	}
	if ((r = data_block_decompress(img, pos, hdr, want, &b)) < 0)
		return r;
	*out = block_cache_put(img->datac, b);
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
			block_cache_release(img->datac, r->held[i]);
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
	b = fragment_ahead_take(img, in->frag, le64(e), le32(e + 8));
	if (!b && (rc = data_block(img, le64(e), le32(e + 8), 0, &b)) < 0)
		return rc;
	if (in->frag_off > b->len || tail > b->len - in->frag_off) {
		block_cache_release(img->datac, b);
		return -EIO;
	}
	if ((rc = reply_add(r, b->data + in->frag_off + from, len, b)) < 0)
		block_cache_release(img->datac, b);
	return rc;
}

/* The blocks of in's block list; *has_frag: its tail is in a fragment. */
static uint64_t list_blocks(const struct image *img, const struct inode *in, bool *has_frag)
{
	uint64_t bs = img->block_size, tail = in->size % bs;

	*has_frag = in->frag != INVALID_FRAG && tail != 0;
	return in->size / bs + (!*has_frag && tail ? 1 : 0);
}

int file_read(struct image *img, const struct inode *in, uint64_t off, size_t size,
	      struct read_reply *r)
{
	uint64_t bs = img->block_size, end, k, first, last, nblocks;
	bool has_frag;
	struct block_index bi;
	int rc;

	memset(r, 0, sizeof(*r));
	if (!S_ISREG(in->mode))
		return -EINVAL;
	if (off >= in->size || size == 0)
		return 0;
	end = in->size - off < size ? in->size : off + size;
	if (img->recorder)
		profile_recorder_note(img->recorder, in->id, off, end);
	nblocks = list_blocks(img, in, &has_frag);
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
				block_cache_release(img->datac, b);
		}
		if (rc < 0)
			goto fail;
		bi.pos += hdr & ~DATA_UNCOMPRESSED;
		bi.k = k + 1;
	}
	if (first < nblocks) {
		remember_block(img, &bi);
		data_ahead_note(img, in, first, last, nblocks, &bi);
	}
	return 0;
fail:
	read_reply_done(img, r);
	return rc;
}

void image_work_ahead(struct image *img)
{
	uint64_t from = atomic_exchange_explicit(&img->advise_from, 0, memory_order_relaxed);

	if (from)
		read_ahead(img, from - 1);
	fragment_ahead_work(img);
	data_ahead_work(img);
}

void image_record_profile(struct image *img, struct profile_recorder *rec)
{
	img->recorder = rec;
	img->record_exact = rec != NULL;
}

int file_extents(struct image *img, const struct inode *in, uint64_t from, uint64_t to,
		 void (*part)(void *ctx, uint64_t off, uint64_t len), void *ctx)
{
	uint64_t bs = img->block_size, nblocks, first, last, len = 0;
	struct block_index bi;
	bool has_frag;
	int rc;

	if (!S_ISREG(in->mode))
		return -EINVAL;
	if (to > in->size)
		to = in->size;
	if (from >= to)
		return 0;
	nblocks = list_blocks(img, in, &has_frag);
	first = from / bs;
	last = (to - 1) / bs;
	if (first < nblocks) {
		uint64_t upto = last < nblocks ? last : nblocks - 1;

		if ((rc = seek_block(img, in, first, &bi)) < 0)
			return rc;
		for (uint64_t k = first; k <= upto; k++) {
			unsigned char w[4];

			if ((rc = md_read(img, &bi.cur, w, 4)) < 0)
				return rc;
			len += le32(w) & ~DATA_UNCOMPRESSED;
			/* Beyond what a prefetch would take anyway. */
			if (len >= START_PROFILE_MAX_PREFETCH)
				break;
		}
		if (bi.pos >= img->bytes_used || len > img->bytes_used - bi.pos)
			return -EIO;
		if (len)
			part(ctx, bi.pos, len);
	}
	if (has_frag && last >= nblocks) {
		unsigned char e[16];
		uint64_t at;
		uint32_t size;

		if ((rc = table_entry(img, img->frag_start, in->frag, 16, e)) < 0)
			return rc;
		at = le64(e);
		size = le32(e + 8) & ~DATA_UNCOMPRESSED;
		if (size == 0 || size > bs || at >= img->bytes_used || size > img->bytes_used - at)
			return -EIO;
		part(ctx, at, size);
	}
	return 0;
}

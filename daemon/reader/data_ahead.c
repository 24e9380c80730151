/* A large file's data blocks decompressed ahead of a reader going through
 * the file.
 *
 * A client reading a file from start to end (md5sum, cp, a program
 * loading its libraries) gets its blocks through the kernel's read-ahead:
 * while it works through block N, the kernel asks for N + 1, and one
 * serving thread decompresses it. Decompressing is most of the reader's
 * work, so on a node with a CPU to spare the reader is the slower end of
 * that pipeline (docs/performance.md, section 19). Once a file's reads go
 * on from one to the next, the thread that has just answered block N
 * decompresses N + 2 after its answer, while another thread serves N + 1:
 * two blocks are decompressed at once, and N + 2 waits in the data cache
 * for the kernel's request. A read that comes for a block being
 * decompressed ahead waits for it rather than doing it twice. Reads that
 * jump start nothing, so random readers pay no CPU for it; nothing is
 * held beside the data cache. */
#include "config.h"

#include "reader/data_ahead.h"

#include "reader/block_cache.h"
#include "reader/image_format.h"

void data_ahead_note(struct image *img, const struct inode *in, uint64_t first, uint64_t last,
		     uint64_t nblocks, const struct block_index *bi)
{
	uint64_t want = last + 2, bs = img->block_size, file = in->id + 1; /* 0: none */
	struct md_cursor cur = bi->cur;
	unsigned char w[8];
	bool going_on;

	pthread_mutex_lock(&img->ahead_lock);
	/* Threads answer neighbouring blocks in any order: "goes on" allows
	 * a block on either side of where the last read ended. */
	going_on = file == img->data_last_file && first <= img->data_last_next + 1 &&
		   first + 2 >= img->data_last_next;
	img->data_last_next = last + 1;
	img->data_last_file = file;
	pthread_mutex_unlock(&img->ahead_lock);
	if (!going_on || want >= nblocks || bi->k != last + 1)
		return;
	/* The header words of blocks last + 1 and last + 2 (metadata the
	 * walk has just read: cached). */
	if (md_read(img, &cur, w, sizeof(w)) < 0)
		return;
	uint32_t next = le32(w), hdr = le32(w + 4);
	uint64_t pos = bi->pos + (next & ~DATA_UNCOMPRESSED);
	if ((hdr & ~DATA_UNCOMPRESSED) == 0) /* sparse: nothing to decompress */
		return;
	pthread_mutex_lock(&img->ahead_lock);
	img->data_want_pos = pos;
	img->data_want_hdr = hdr;
	img->data_want_len = in->size - want * bs < bs ? (size_t)(in->size - want * bs) : bs;
	pthread_mutex_unlock(&img->ahead_lock);
}

void data_ahead_work(struct image *img)
{
	struct cached_block *b;
	uint64_t pos;
	uint32_t hdr;
	size_t len;

	pthread_mutex_lock(&img->ahead_lock);
	pos = img->data_want_pos;
	if (pos == 0 || img->data_busy_key != 0) {
		pthread_mutex_unlock(&img->ahead_lock);
		return;
	}
	hdr = img->data_want_hdr;
	len = img->data_want_len;
	img->data_want_pos = 0;
	img->data_busy_key = pos | img->cache_tag;
	pthread_mutex_unlock(&img->ahead_lock);

	b = block_cache_get(img->datac, pos | img->cache_tag);
	if (b) /* a read got there first */
		block_cache_release(img->datac, b);
	else if (data_block_decompress(img, pos, hdr, len, &b) == 0)
		block_cache_release(img->datac, block_cache_put(img->datac, b));

	pthread_mutex_lock(&img->ahead_lock);
	img->data_busy_key = 0;
	pthread_cond_broadcast(&img->ahead_done);
	pthread_mutex_unlock(&img->ahead_lock);
}

bool data_ahead_wait(struct image *img, uint64_t key)
{
	bool waited = false;

	/* 0 is "none" (a damaged image's block at 0 included), never a block
	 * to wait for. */
	if (key == 0)
		return false;
	pthread_mutex_lock(&img->ahead_lock);
	while (img->data_busy_key == key) {
		waited = true;
		pthread_cond_wait(&img->ahead_done, &img->ahead_lock);
	}
	pthread_mutex_unlock(&img->ahead_lock);
	return waited;
}

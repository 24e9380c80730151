/* squash-reader's zstd decompressor, one context per thread (zstd_block.h). */
#include "config.h"

#include "reader/zstd_block.h"

#include <errno.h>
#include <pthread.h>
#include <zstd.h>

/* The key's destructor frees a thread's context when the thread exits
 * (libfuse ends worker threads beyond its idle count after a burst). */
static pthread_key_t ctx_key;
static pthread_once_t ctx_key_once = PTHREAD_ONCE_INIT;
static int ctx_key_error;

static void free_ctx(void *ctx)
{
	ZSTD_freeDCtx(ctx);
}

static void make_ctx_key(void)
{
	ctx_key_error = pthread_key_create(&ctx_key, free_ctx);
}

int zstd_block_init(void)
{
	if (pthread_once(&ctx_key_once, make_ctx_key) != 0)
		return EINVAL;
	return ctx_key_error;
}

static ZSTD_DCtx *thread_ctx(void)
{
	ZSTD_DCtx *ctx;

	if (zstd_block_init() != 0)
		return NULL;
	ctx = pthread_getspecific(ctx_key);
	if (ctx)
		return ctx;
	ctx = ZSTD_createDCtx();
	if (!ctx)
		return NULL;
	if (pthread_setspecific(ctx_key, ctx) != 0) {
		ZSTD_freeDCtx(ctx);
		return NULL;
	}
	return ctx;
}

int zstd_block_decompress(void *in, size_t insz, void *out, size_t *outsz)
{
	ZSTD_DCtx *ctx = thread_ctx();
	size_t got;

	/* No squashfs block is empty; zstd would call no input, or only
	 * skippable frames, a success of 0 bytes. */
	if (!ctx || insz == 0)
		return -1;
	/* Bounded by *outsz: a frame that decodes to more fails with
	 * dstSize_tooSmall. A one-shot decompression allocates nothing, so
	 * the window size a frame header claims costs no memory. */
	got = ZSTD_decompressDCtx(ctx, out, *outsz, in, insz);
	if (ZSTD_isError(got) || got == 0) {
		/* Start the next block from a clean context, whatever this
		 * one left behind. */
		ZSTD_DCtx_reset(ctx, ZSTD_reset_session_and_parameters);
		return -1;
	}
	*outsz = got;
	return 0;
}

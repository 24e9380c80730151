/* Which small files of an image are in the kernel's page cache already
 * (stored_files.h). */
#include "config.h"

#include "reader/stored_files.h"

#include <stdatomic.h>
#include <sys/mman.h>

#include "reader/image_format.h"

/* The record of stored files, mapped at the first use: only the pages
 * of the bits set cost memory (one per 32,768 inodes). NULL: none. */
static _Atomic uint64_t *stored_map(struct image *img)
{
	_Atomic uint64_t *m = atomic_load_explicit(&img->stored, memory_order_acquire), *none = NULL;
	size_t len = ((size_t)img->inodes / 64 + 1) * sizeof(uint64_t);
	void *p;

	if (m)
		return m;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (!atomic_compare_exchange_strong(&img->stored, &none, (_Atomic uint64_t *)p)) {
		munmap(p, len);
		return none;
	}
	return p;
}

/* Sets in's bit; whether it was set already (true, also where there is
 * no record: then nothing is stored). Inode numbers start at 1. */
bool stored_test_and_set(struct image *img, const struct inode *in)
{
	_Atomic uint64_t *m;
	uint64_t bit;

	if (in->ino == 0 || in->ino > img->inodes || !(m = stored_map(img)))
		return true;
	bit = 1ull << (in->ino % 64);
	return atomic_fetch_or_explicit(&m[in->ino / 64], bit, memory_order_relaxed) & bit;
}

void stored_forget(struct image *img)
{
	_Atomic uint64_t *m = atomic_exchange(&img->stored, NULL);

	if (m)
		munmap((void *)m, ((size_t)img->inodes / 64 + 1) * sizeof(uint64_t));
}

void stored_note_read(struct image *img, const struct inode *file, uint64_t off, size_t size)
{
	/* A small file: its bytes all lie in a fragment block. */
	bool small = file->frag != INVALID_FRAG && file->size > 0 && file->size < img->block_size;

	if (off == 0 && size >= file->size && small)
		stored_test_and_set(img, file);
}

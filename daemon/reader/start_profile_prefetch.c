/* Reading an image's start profile ahead (start_profile.h): right after the
 * reader opens an image, a thread of its own reads /.squash/start-profile,
 * finds where each file's recorded bytes lie in the image and asks the
 * kernel to read those parts into the image file's page cache, 128 KiB per
 * call so that the requests are in flight together. The job's reads then
 * find them there instead of waiting for one round trip each (Lustre,
 * GPFS, NFS). Only advice: nothing waits for it, the mount is served
 * meanwhile, and an image without a profile costs one lookup. The profile
 * is the user's: every line is checked, and what it asks for is bounded
 * (START_PROFILE_MAX_*). */
#include "config.h"

#include "reader/start_profile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reader/image.h"
#include "reader/image_format.h"
#include "reader/image_path.h"

/* Parts of the image closer than this are asked for as one: the pages
 * between cost less than another request. */
#define MERGE_GAP (32u << 10)

static atomic_uint running;

static bool parse_u64(const char *s, const char *end, uint64_t *v)
{
	uint64_t x = 0;

	if (s == end || end - s > 20)
		return false;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	return true;
}

int start_profile_parse(char *buf, size_t len, int (*each)(void *ctx, const struct profile_line *l),
			void *ctx)
{
	size_t hl = strlen(START_PROFILE_HEADER);
	char *p = buf, *end = buf + len;
	int given = 0;

	if (len < hl + 1 || memcmp(buf, START_PROFILE_HEADER, hl) != 0 || buf[hl] != '\n')
		return -EINVAL;
	p += hl + 1;
	while (p < end && given < (int)START_PROFILE_MAX_FILES) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *line = p, *sp1, *sp2;
		struct profile_line l;

		if (!nl)
			break; /* a last line without its newline: cut short */
		*nl = '\0';
		p = nl + 1;
		if (*line == '#' || memchr(line, '\0', (size_t)(nl - line)))
			continue;
		if (!(sp1 = strchr(line, ' ')) || !(sp2 = strchr(sp1 + 1, ' ')))
			continue;
		if (!parse_u64(line, sp1, &l.from) || !parse_u64(sp1 + 1, sp2, &l.to) ||
		    l.from >= l.to || !image_path_valid(sp2 + 1))
			continue;
		l.path = sp2 + 1;
		given++;
		if (each(ctx, &l))
			break;
	}
	return given;
}

/* ---- the thread */

struct prefetch {
	struct image *img;
	uint64_t off, len;   /* the part being gathered, not yet asked for */
	uint64_t asked;      /* bytes asked for so far */
};

static bool stopping(struct image *img)
{
	return atomic_load(&img->prefetch_stop);
}

static void ask(struct prefetch *pf)
{
	for (uint64_t at = 0; at < pf->len && !stopping(pf->img); at += DATA_READAHEAD_CHUNK) {
		uint64_t n = pf->len - at < DATA_READAHEAD_CHUNK ? pf->len - at : DATA_READAHEAD_CHUNK;

		(void)posix_fadvise(pf->img->fd, (off_t)(pf->off + at), (off_t)n, POSIX_FADV_WILLNEED);
	}
	pf->asked += pf->len;
	pf->len = 0;
}

/* A part of the image the profile's next file needs: joined to the part
 * gathered when they touch, else that one is asked for first (the order is
 * the profile's, the order the start read them). */
static void add_part(void *ctx, uint64_t off, uint64_t len)
{
	struct prefetch *pf = ctx;

	if (pf->asked + pf->len >= START_PROFILE_MAX_PREFETCH)
		return;
	if (len > START_PROFILE_MAX_PREFETCH - pf->asked - pf->len)
		len = START_PROFILE_MAX_PREFETCH - pf->asked - pf->len;
	if (pf->len && off + len + MERGE_GAP >= pf->off && off <= pf->off + pf->len + MERGE_GAP) {
		uint64_t lo = off < pf->off ? off : pf->off;
		uint64_t hi = off + len > pf->off + pf->len ? off + len : pf->off + pf->len;

		pf->off = lo;
		pf->len = hi - lo;
		return;
	}
	if (pf->len)
		ask(pf);
	pf->off = off;
	pf->len = len;
}

static int each_line(void *ctx, const struct profile_line *l)
{
	struct prefetch *pf = ctx;
	struct inode in;

	if (stopping(pf->img) || pf->asked + pf->len >= START_PROFILE_MAX_PREFETCH)
		return 1;
	if (image_path_resolve(pf->img, l->path, &in) == 0 && S_ISREG(in.mode))
		(void)file_extents(pf->img, &in, l->from, l->to, add_part, pf);
	return 0;
}

char *start_profile_read(struct image *img, size_t *len)
{
	struct inode in;
	char *buf = NULL;
	FILE *f;

	if (image_path_resolve(img, START_PROFILE_PATH, &in) < 0 || !S_ISREG(in.mode) || in.size == 0 ||
	    in.size > START_PROFILE_MAX_BYTES || !(f = open_memstream(&buf, len)))
		return NULL;
	int rc = image_file_write(img, &in, f);

	if (fclose(f) != 0 || rc < 0 || *len != in.size) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void *prefetch_thread(void *arg)
{
	struct prefetch pf = { .img = arg };
	size_t len;
	char *buf = start_profile_bytes(pf.img, &pf.img->prefetch_stop, &len);

	if (buf) {
		(void)start_profile_parse(buf, len, each_line, &pf);
		if (pf.len)
			ask(&pf);
		free(buf);
	}
	atomic_fetch_sub(&running, 1);
	return NULL;
}

void start_profile_prefetch_begin(struct image *img)
{
	if (atomic_fetch_add(&running, 1) >= START_PROFILE_MAX_RUNNING) {
		atomic_fetch_sub(&running, 1);
		return;
	}
	atomic_store(&img->prefetch_stop, false);
	if (pthread_create(&img->prefetch_thread, NULL, prefetch_thread, img) != 0) {
		atomic_fetch_sub(&running, 1);
		return;
	}
	img->prefetching = true;
}

void start_profile_prefetch_end(struct image *img)
{
	if (!img->prefetching)
		return;
	atomic_store(&img->prefetch_stop, true);
	pthread_join(img->prefetch_thread, NULL);
	img->prefetching = false;
}

void start_profile_prefetch_wait(struct image *img)
{
	if (!img->prefetching)
		return;
	pthread_join(img->prefetch_thread, NULL);
	img->prefetching = false;
}

/* libFuzzer harness: squash-reader's image layer (daemon/reader/image.h),
 * the code every FUSE operation of the reader calls. The input is a whole
 * image, put in a memfd; the harness opens it and walks it as a job would
 * through the mount: for each directory the listing (resumed from an
 * entry's cookie, as READDIR does), a lookup of every listed name and of
 * absent ones (LOOKUP), each entry's inode and attributes (GETATTR), the
 * contents of every file (READ), symlink targets (READLINK), and xattrs
 * (LISTXATTR with its size probe, GETXATTR of each listed name). Bounded:
 * depth, entries and bytes read per input, so that an image claiming
 * millions of entries or terabytes of sparse file stays fast.
 *
 * Then the same input as the layers of a union (daemon/reader/union_tree.h,
 * what a dataset's bundles are): split at each "SQUNION!" into up to 4
 * images, or, without one, the image twice over itself (every directory
 * merges with itself, whiteouts and opaque directories included), walked
 * the same way through the union's listings and lookups.
 *
 * A start profile in the image (/.squash/start-profile, start_profile.h)
 * is read ahead to its end before the walk, which records what it reads
 * and writes that down as a profile (the walk back to the paths).
 *
 * Besides "no crash, no leak, no undefined behaviour, no hang", it
 * asserts what ops.c relies on: a READ never answers more than it was
 * asked, the xattr list and values fit the kernel's limits and answer the
 * same length with and without a buffer. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader/block_cache.h"
#include "reader/image.h"
#include "reader/start_profile.h"
#include "reader/union_tree.h"

#define MAX_DEPTH 8
#define MAX_ENTRIES 512
#define MAX_FILE_BYTES (256u << 10)
#define MAX_TOTAL_BYTES (2u << 20)
#define XATTR_MAX 65536

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct budget {
	unsigned entries;
	uint64_t bytes;
};

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void walk_xattrs(struct image *img, const struct inode *in)
{
	static char list[XATTR_MAX], value[XATTR_MAX];

	for (int trusted = 0; trusted < 2; trusted++) {
		int len = xattr_list(img, in, trusted, NULL, 0);

		if (len < 0)
			continue;
		check(len <= XATTR_MAX);
		check(xattr_list(img, in, trusted, list, sizeof(list)) == len);
		if (len > 0)
			check(xattr_list(img, in, trusted, list, (size_t)len - 1) == -ERANGE);
		for (int at = 0; at < len;) {
			const char *name = list + at;
			size_t n = strnlen(name, (size_t)(len - at));
			int vlen;

			check(n > 0 && n < (size_t)(len - at)); /* NUL-terminated, not empty */
			vlen = xattr_get(img, in, name, NULL, 0);
			if (vlen >= 0) {
				check(vlen <= XATTR_MAX);
				check(xattr_get(img, in, name, value, sizeof(value)) == vlen);
			}
			at += (int)n + 1;
		}
	}
	check(xattr_get(img, in, "user.\x01" "absent", value, sizeof(value)) < 0);
	check(xattr_get(img, in, "system.posix_acl_access", value, sizeof(value)) == -EOPNOTSUPP);
}

static void read_file(struct image *img, const struct inode *in, struct budget *b)
{
	uint64_t off = 0;

	while (off < in->size && off < MAX_FILE_BYTES && b->bytes < MAX_TOTAL_BYTES) {
		struct read_reply r;
		size_t got;

		/* Odd-sized pieces cross block boundaries. */
		if (file_read(img, in, off, 70001, &r) < 0)
			return;
		got = r.bytes;
		check(got <= 70001);
		b->bytes += got;
		off += got;
		read_reply_done(img, &r);
		/* What a serving thread does after its answer: the next
		 * fragment block of a walk in order, from the image's table. */
		image_work_ahead(img);
		if (got == 0)
			return;
	}
	/* And a read from past the end of the first block. */
	if (in->size > 5000) {
		struct read_reply r;

		if (file_read(img, in, in->size - 5000, 4096, &r) == 0) {
			check(r.bytes <= 4096);
			read_reply_done(img, &r);
		}
	}
}

static void walk_dir(struct image *img, const struct inode *dir, int depth, struct budget *b)
{
	struct dir_iter it;
	struct dir_entry e;
	uint64_t id;
	unsigned n = 0;
	int r;

	if (depth > MAX_DEPTH || dir_open(img, dir, 0, &it) < 0)
		return;
	(void)dir_lookup(img, dir, "\x7f-not-there", &id);
	(void)dir_lookup(img, dir, "0", &id);
	while (b->entries < MAX_ENTRIES && (r = dir_next(img, &it, &e)) > 0) {
		struct inode in;
		struct stat st;

		b->entries++;
		check(e.namelen > 0 && e.namelen <= 256 && strlen(e.name) == e.namelen);
		/* Every 5th entry: resume from its cookie. */
		if (++n % 5 == 0 && dir_open(img, dir, e.cookie, &it) < 0)
			return;
		(void)dir_lookup(img, dir, e.name, &id);
		if (inode_get(img, e.id, &in) < 0)
			continue;
		inode_stat(&in, &st);
		walk_xattrs(img, &in);
		if (S_ISDIR(in.mode)) {
			walk_dir(img, &in, depth + 1, b);
		} else if (S_ISREG(in.mode)) {
			read_file(img, &in, b);
		} else if (S_ISLNK(in.mode)) {
			char target[4096];

			if (inode_readlink(img, &in, target, sizeof(target)) == 0)
				check(strlen(target) <= in.size);
		}
	}
}

static void walk_union_node(struct union_fs *u, uint64_t node, const struct tree_node *n, int depth,
			    struct budget *b);

struct union_walk {
	struct union_fs *u;
	uint64_t dir;
	int depth;
	struct budget *b;
	unsigned seen;
};

static int union_entry(void *ctx, const struct tree_dirent *e)
{
	struct union_walk *w = ctx;
	struct tree_node n;
	uint64_t node;

	if (w->b->entries++ >= MAX_ENTRIES)
		return 1;
	w->seen++;
	check(e->cookie > 2 && strlen(e->name) > 0 && strlen(e->name) <= 256);
	/* What the listing says (READDIRPLUS), a lookup finds: the same node. */
	if (union_lookup(w->u, w->dir, e->name, &node, &n) == 0) {
		check(e->node == 0 || node == e->node);
		walk_union_node(w->u, node, &n, w->depth + 1, w->b);
	}
	return 0;
}

static void walk_union_node(struct union_fs *u, uint64_t node, const struct tree_node *n, int depth,
			    struct budget *b)
{
	static char buf[XATTR_MAX];
	struct tree_node again;
	struct stat st;
	int len;

	check(union_node_get(u, node, &again) == 0 && again.in.id == n->in.id);
	union_stat(n, &st);
	len = union_xattr_list(n, true, NULL, 0);
	if (len >= 0) {
		check(len <= XATTR_MAX);
		check(union_xattr_list(n, true, buf, sizeof(buf)) == len);
	}
	check(union_xattr_get(n, "trusted.overlay.opaque", buf, sizeof(buf)) == -ENODATA);
	if (S_ISDIR(n->in.mode) && depth <= MAX_DEPTH) {
		struct union_walk w = { .u = u, .dir = node, .depth = depth, .b = b };
		uint64_t absent;
		struct tree_node an;

		(void)union_lookup(u, node, "\x7f-not-there", &absent, &an);
		(void)union_readdir(u, n, 0, TREE_PLUS_ALL, union_entry, &w);
		/* Resumed from an entry's position, as READDIR does. */
		(void)union_readdir(u, n, 4, TREE_PLUS_NONE, union_entry, &w);
	} else if (S_ISREG(n->in.mode)) {
		read_file(n->img, &n->in, b);
	} else if (S_ISLNK(n->in.mode)) {
		char target[4096];

		(void)inode_readlink(n->img, &n->in, target, sizeof(target));
	}
}

/* The input as a union's layers (see the top). */
static void fuzz_union(const uint8_t *data, size_t size)
{
	static const char sep[] = "SQUNION!";
	struct image *imgs[4];
	int fds[4];
	unsigned n = 0, opened = 0;
	size_t at = 0;
	char err[256];

	while (n < 4) {
		const uint8_t *next = n < 3 ? memmem(data + at, size - at, sep, 8) : NULL;
		size_t len = next ? (size_t)(next - (data + at)) : size - at;

		if ((fds[n] = memfd_create("fuzz_union", MFD_CLOEXEC)) < 0)
			abort();
		for (size_t done = 0; done < len;) {
			ssize_t k = write(fds[n], data + at + done, len - done);

			if (k <= 0)
				abort();
			done += (size_t)k;
		}
		n++;
		if (!next)
			break;
		at += len + 8;
	}
	if (n == 1) { /* the image over itself */
		if ((fds[1] = dup(fds[0])) < 0)
			abort();
		n = 2;
	}
	/* As squash-reader opens a union's images: sharing two caches. */
	struct block_cache md, dc;

	block_cache_init(&md, 4);
	block_cache_init(&dc, 2);
	while (opened < n &&
	       image_open_shared(fds[opened], &md, &dc, opened + 1, &imgs[opened], err, sizeof(err)) == 0)
		opened++;
	if (opened == n) {
		struct budget b = { 0 };
		struct union_fs *u;
		struct tree_node root;

		if (union_open(imgs, n, &u, err, sizeof(err)) == 0) {
			if (union_node_get(u, 1, &root) == 0)
				walk_union_node(u, 1, &root, 0, &b);
			union_close(u);
		}
	}
	for (unsigned i = 0; i < opened; i++)
		image_close(imgs[i]);
	block_cache_destroy(&md);
	block_cache_destroy(&dc);
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct budget b = { 0 };
	struct image *img;
	struct inode root;
	char err[256];
	size_t done = 0;
	int fd = memfd_create("fuzz_reader", MFD_CLOEXEC);

	if (fd < 0)
		abort();
	while (done < size) {
		ssize_t k = write(fd, data + done, size - done);

		if (k <= 0)
			abort();
		done += (size_t)k;
	}
	if (image_open(fd, 4, 2, &img, err, sizeof(err)) == 0) {
		struct statvfs sv;
		struct profile_recorder *rec = profile_recorder_new();
		FILE *out = fopen("/dev/null", "w");

		start_profile_prefetch_wait(img);
		image_statfs(img, &sv);
		image_record_profile(img, rec);
		if (inode_get(img, image_root(img), &root) == 0) {
			walk_xattrs(img, &root);
			walk_dir(img, &root, 0, &b);
		}
		image_record_profile(img, NULL);
		if (rec && out)
			(void)profile_recorder_write(rec, img, out, 0);
		if (out)
			fclose(out);
		profile_recorder_free(rec);
		image_close(img);
	}
	close(fd);
	fuzz_union(data, size);
	return 0;
}

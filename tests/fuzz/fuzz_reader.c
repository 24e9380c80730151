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
 * Besides "no crash, no leak, no undefined behaviour, no hang", it
 * asserts what ops.c relies on: a READ never answers more than it was
 * asked, the xattr list and values fit the kernel's limits and answer the
 * same length with and without a buffer. */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader/image.h"

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

		/* Odd-sized pieces cross block boundaries. */
		if (file_read(img, in, off, 70001, &r) < 0)
			return;
		check(r.bytes <= 70001);
		b->bytes += r.bytes;
		off += r.bytes;
		read_reply_done(img, &r);
		if (r.bytes == 0)
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

		image_statfs(img, &sv);
		if (inode_get(img, image_root(img), &root) == 0) {
			walk_xattrs(img, &root);
			walk_dir(img, &root, 0, &b);
		}
		image_close(img);
	}
	close(fd);
	return 0;
}

/* squash-reader's image layer reads every image squashfs-tools makes here:
 * one tree (small, empty, block-sized, odd-sized and sparse files, a hard
 * link, symlinks, a FIFO, a 255-byte name, a 40-deep path, a directory
 * with an index, xattrs: user.*, an out-of-line value shared by two files,
 * and, as root, trusted.* and security.capability) is packed with every
 * compressor and option set below, and every file is found by lookup,
 * listed, stat'ed (st_blocks as the kernel's squashfs counts them), read
 * and its xattrs listed and fetched through the functions the FUSE
 * operations call; all of it must equal the source.
 * A compressor mksquashfs cannot use here FAILS the test (install-deps.sh
 * installs them all). Under ASan (the sanitizer build runs the same
 * tests; it looks for the reader's memory errors, not the codecs') the
 * formats that exercise the reader's own code paths only: its xz, legacy
 * lzma and zstd decoders, libsquashfuse's, no fragments and small blocks.
 * Skips (77) only without mksquashfs. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "reader/image.h"
#include "unit.h"

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void put_file(const char *path, size_t size, unsigned seed)
{
	FILE *f = fopen(path, "wb");

	CHECK(f != NULL);
	if (!f)
		return;
	srand(seed);
	for (size_t i = 0; i < size; i++)
		fputc(seed % 3 == 0 ? rand() & 0xff : (int)('a' + i % 23), f);
	fclose(f);
}

static void set_xattr(const char *path, const char *name, const void *v, size_t len)
{
	CHECK_INT(lsetxattr(path, name, v, len, 0), 0);
}

static void make_tree(const char *t)
{
	char p[4096], cmd[12288];
	size_t n;

	snprintf(cmd, sizeof(cmd),
		 "set -e; mkdir -p %s/dir %s/index; cd %s; : > empty; echo hello > small;"
		 "truncate -s 1000000 sparse; printf x | dd of=sparse bs=1 seek=500000 conv=notrunc 2>/dev/null;"
		 "ln small hard; ln -s small link; ln -s /no/such/place dangling; mkfifo fifo;"
		 "touch -d @1234567890 small",
		 t, t, t);
	CHECK_INT(sh(cmd), 0);
	snprintf(p, sizeof(p), "%s/exact", t);
	put_file(p, 131072, 3);
	snprintf(p, sizeof(p), "%s/odd", t);
	put_file(p, 300001, 6);
	snprintf(p, sizeof(p), "%s/text", t);
	put_file(p, 5000, 1);
	/* A 255-byte name. */
	n = (size_t)snprintf(p, sizeof(p), "%s/", t);
	memset(p + n, 'n', 255);
	p[n + 255] = '\0';
	put_file(p, 10, 1);
	/* A 40-deep path. */
	n = (size_t)snprintf(p, sizeof(p), "%s/deep", t);
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(p + n, sizeof(p) - n, "/d%d", i);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && echo bottom > %s/file", p, p);
	CHECK_INT(sh(cmd), 0);
	/* A listing over one metadata block (8 KiB): mksquashfs indexes it. */
	for (int i = 0; i < 400; i++) {
		snprintf(p, sizeof(p), "%s/index/entry-with-a-longish-name-%05d", t, i);
		put_file(p, (size_t)(i % 5), 1);
	}

	/* xattrs: small inline values, a value two files share (mksquashfs
	 * stores the second out of line), several on one file, one on a
	 * directory. */
	char big[300];

	memset(big, 'v', sizeof(big));
	snprintf(p, sizeof(p), "%s/small", t);
	set_xattr(p, "user.one", "1", 1);
	set_xattr(p, "user.empty", "", 0);
	set_xattr(p, "user.shared", big, sizeof(big));
	snprintf(p, sizeof(p), "%s/odd", t);
	set_xattr(p, "user.shared", big, sizeof(big));
	set_xattr(p, "user.other", "x\0y", 3);
	snprintf(p, sizeof(p), "%s/dir", t);
	set_xattr(p, "user.on_a_dir", "d", 1);
	if (geteuid() == 0) {
		/* security.capability as setcap cap_net_raw+ep writes it (v2). */
		const unsigned char cap[20] = { 0x01, 0, 0, 0x02, 0, 0x20, 0, 0 };

		snprintf(p, sizeof(p), "%s/exact", t);
		set_xattr(p, "security.capability", cap, sizeof(cap));
		set_xattr(p, "trusted.t", "secret", 6);
		snprintf(p, sizeof(p), "%s/link", t);
		set_xattr(p, "trusted.on_a_link", "l", 1);
	}
}

struct cmp {
	struct image *img;
	int files, xattrs;
};

static void compare_content(struct cmp *c, const char *path, const struct inode *in)
{
	FILE *f = fopen(path, "rb");
	uint64_t off = 0;
	unsigned char want[70001];

	CHECK(f != NULL);
	if (!f)
		return;
	while (off < in->size) {
		struct read_reply r;
		size_t got, at = 0;
		int rc = file_read(c->img, in, off, 70001, &r);

		CHECK_INT(rc, 0);
		if (rc < 0 || r.bytes == 0) {
			fprintf(stderr, "%s: short read at %llu\n", path, (unsigned long long)off);
			break;
		}
		got = fread(want, 1, r.bytes, f);
		CHECK_INT(got, r.bytes);
		for (int i = 0; i < r.n && got == r.bytes; i++) {
			if (memcmp(want + at, r.iov[i].iov_base, r.iov[i].iov_len)) {
				fprintf(stderr, "%s: content differs at %llu\n", path,
					(unsigned long long)(off + at));
				CHECK(0);
				break;
			}
			at += r.iov[i].iov_len;
		}
		off += r.bytes;
		read_reply_done(c->img, &r);
	}
	CHECK_INT(fgetc(f), EOF);
	fclose(f);
}

static void compare_xattrs(struct cmp *c, const char *path, const struct inode *in)
{
	char src[65536], got[65536], v1[65536], v2[65536];
	ssize_t n = llistxattr(path, src, sizeof(src));
	int len, names = 0;

	CHECK(n >= 0);
	if (n < 0)
		return;
	/* Length probe, then the list. */
	len = xattr_list(c->img, in, geteuid() == 0, NULL, 0);
	CHECK_INT(len, n);
	if (len != n) {
		fprintf(stderr, "%s: xattr list of %d bytes, source %zd\n", path, len, n);
		return;
	}
	CHECK_INT(xattr_list(c->img, in, geteuid() == 0, got, sizeof(got)), n);
	if (n > 0)
		CHECK_INT(xattr_list(c->img, in, geteuid() == 0, got, (size_t)n - 1), -ERANGE);
	/* Same names (in any order), same values. */
	for (ssize_t at = 0; at < n; at += (ssize_t)strlen(src + at) + 1) {
		const char *name = src + at;
		ssize_t vl = lgetxattr(path, name, v1, sizeof(v1));
		bool listed = false;

		for (int k = 0; k < len; k += (int)strlen(got + k) + 1)
			listed |= !strcmp(got + k, name);
		CHECK(listed);
		CHECK_INT(xattr_get(c->img, in, name, NULL, 0), vl);
		CHECK_INT(xattr_get(c->img, in, name, v2, sizeof(v2)), vl);
		CHECK(vl >= 0 && !memcmp(v1, v2, (size_t)vl));
		if (vl > 1) /* (a size of 0 asks for the length) */
			CHECK_INT(xattr_get(c->img, in, name, v2, (size_t)vl - 1), -ERANGE);
		names++;
	}
	c->xattrs += names;
	CHECK_INT(xattr_get(c->img, in, "user.not-there", v2, sizeof(v2)), -ENODATA);
	CHECK_INT(xattr_get(c->img, in, "system.posix_acl_access", v2, sizeof(v2)), -EOPNOTSUPP);
}

static void compare(struct cmp *c, const char *path, uint64_t id, const char *name);

static void compare_dir(struct cmp *c, const char *path, const struct inode *dir)
{
	DIR *d = opendir(path);
	struct dirent *e;
	struct dir_iter it;
	struct dir_entry de;
	int entries = 0, listed = 0, r;
	uint64_t id;

	CHECK(d != NULL);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char child[8192];

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		entries++;
		snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
		r = dir_lookup(c->img, dir, e->d_name, &id);
		CHECK_INT(r, 0);
		if (r == 0)
			compare(c, child, id, e->d_name);
		else
			fprintf(stderr, "%s: not found in the image\n", child);
	}
	closedir(d);
	CHECK_INT(dir_lookup(c->img, dir, "no-such-name", &id), -ENOENT);
	CHECK_INT(dir_open(c->img, dir, 0, &it), 0);
	while ((r = dir_next(c->img, &it, &de)) > 0)
		listed++;
	CHECK_INT(r, 0);
	CHECK_INT(listed, entries);
}

static void compare(struct cmp *c, const char *path, uint64_t id, const char *name)
{
	struct stat st, got;
	struct inode in;
	int r = inode_get(c->img, id, &in);

	CHECK_INT(r, 0);
	CHECK_INT(lstat(path, &st), 0);
	if (r < 0)
		return;
	inode_stat(&in, &got);
	if (got.st_mode != st.st_mode || got.st_uid != st.st_uid || got.st_gid != st.st_gid ||
	    got.st_mtime != st.st_mtime || (!S_ISDIR(st.st_mode) && got.st_size != st.st_size) ||
	    got.st_nlink != st.st_nlink) {
		fprintf(stderr, "%s: stat differs (mode %o/%o size %lld/%lld nlink %lu/%lu mtime %lld/%lld)\n",
			path, got.st_mode, st.st_mode, (long long)got.st_size, (long long)st.st_size,
			(unsigned long)got.st_nlink, (unsigned long)st.st_nlink,
			(long long)got.st_mtime, (long long)st.st_mtime);
		CHECK(0);
	}
	/* st_blocks as the kernel's squashfs counts them: its xattr list's
	 * blocks (a list exactly when the source has xattrs), then none but
	 * for files, and a file's sparse blocks left out. */
	blkcnt_t blocks = got.st_blocks;
	CHECK_INT(in.xattr_size > 0, llistxattr(path, NULL, 0) > 0);
	if (in.xattr_size > 0)
		blocks -= ((in.xattr_size - 1) >> 9) + 1;
	if (!S_ISREG(st.st_mode))
		CHECK_INT(blocks, 0);
	else if (!strcmp(name, "sparse"))
		CHECK(blocks > 0 && blocks * 512 < got.st_size / 2);
	else
		CHECK_INT(blocks, (got.st_size + 511) / 512);
	compare_xattrs(c, path, &in);
	if (S_ISDIR(st.st_mode)) {
		compare_dir(c, path, &in);
	} else if (S_ISREG(st.st_mode)) {
		c->files++;
		compare_content(c, path, &in);
	} else if (S_ISLNK(st.st_mode)) {
		char want[4096], target[4096];
		ssize_t n = readlink(path, want, sizeof(want) - 1);

		CHECK(n >= 0);
		want[n < 0 ? 0 : n] = '\0';
		CHECK_INT(inode_readlink(c->img, &in, target, sizeof(target)), 0);
		CHECK_STR(target, want);
	}
}

int main(void)
{
	static const char *const formats[] = {
		"-comp gzip -no-fragments -b 4K",
		"-comp xz -Xbcj x86",
		"-comp zstd -always-use-fragments -b 16K",
		/* Legacy lzma: the reader's own decoder (liblzma), whatever
		 * libsquashfuse has; admission is test_superblock's. */
		"-comp lzma",
#ifndef __SANITIZE_ADDRESS__
		"-comp gzip",
		"-comp xz",
		"-comp lzo",
		"-comp lz4",
		"-comp lz4 -Xhc",
		"-comp zstd",
#endif
	};
	char dir[] = "/tmp/test-codecs-XXXXXX", tree[256], img[256], cmd[1024], err[256];

	if (sh("command -v mksquashfs >/dev/null") != 0) {
		fprintf(stderr, "SKIP: mksquashfs not installed\n");
		return 77;
	}
	/* mksquashfs stamps SOURCE_DATE_EPOCH on every inode, and
	 * dpkg-buildpackage exports it (the .deb built with its checks): the
	 * images must keep the tree's own times, which the reader's stat is
	 * compared with. */
	unsetenv("SOURCE_DATE_EPOCH");
	if (!mkdtemp(dir))
		return 1;
	snprintf(tree, sizeof(tree), "%s/tree", dir);
	make_tree(tree);
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		struct cmp c = { 0 };
		struct image *im = NULL;
		struct inode root;
		int fd;

		snprintf(img, sizeof(img), "%s/img.sqfs", dir);
		snprintf(cmd, sizeof(cmd), "mksquashfs %s %s -noappend -quiet -no-progress %s >/dev/null",
			 tree, img, formats[f]);
		if (sh(cmd) != 0) {
			fprintf(stderr, "FAIL: mksquashfs %s: cannot make this image here\n", formats[f]);
			CHECK(0);
			continue;
		}
		fd = open(img, O_RDONLY);
		CHECK(fd >= 0);
		CHECK_INT(image_open(fd, 0, 0, &im, err, sizeof(err)), 0);
		if (!im) {
			fprintf(stderr, "FAIL: %s: %s\n", formats[f], err);
			close(fd);
			continue;
		}
		c.img = im;
		CHECK_INT(inode_get(im, image_root(im), &root), 0);
		compare_dir(&c, tree, &root);
		CHECK_INT(c.files, 409); /* 8 at the top (the long name too), deep/.../file, 400 in index/ */
		CHECK_INT(c.xattrs, geteuid() == 0 ? 12 : 9); /* small and hard: one inode */
		fprintf(stderr, "%s: %d files, %d xattrs equal to the source\n", formats[f], c.files,
			c.xattrs);
		image_close(im);
		close(fd);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sh(cmd);
	return unit_exit_code();
}

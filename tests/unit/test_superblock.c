/* The squashfs superblock check, on real mksquashfs images and on corrupt
 * copies of them. Skipped (77) when mksquashfs is not installed. */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "superblock.h"
#include "unit.h"

static char dir[] = "/tmp/test_superblock.XXXXXX";
static char err[512];

static int run(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, STDOUT_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Builds DIR/NAME.sqfs from a small tree with the given compressor and
 * extra mksquashfs options (NULL-terminated). Returns 0 on success. */
static int make_image(const char *name, const char *comp, const char *extra)
{
	char src[256], img[256];
	char *argv[16];
	int n = 0;

	snprintf(src, sizeof(src), "%s/tree", dir);
	snprintf(img, sizeof(img), "%s/%s.sqfs", dir, name);
	argv[n++] = "mksquashfs";
	argv[n++] = src;
	argv[n++] = img;
	argv[n++] = "-comp";
	argv[n++] = (char *)comp;
	argv[n++] = "-noappend";
	argv[n++] = "-quiet";
	argv[n++] = "-no-progress";
	if (extra) {
		argv[n++] = (char *)extra;
	}
	argv[n] = NULL;
	return run(argv);
}

static int open_image(const char *name)
{
	char img[256];

	snprintf(img, sizeof(img), "%s/%s.sqfs", dir, name);
	return open(img, O_RDONLY | O_CLOEXEC);
}

static int check_image(const char *name, enum squash_reader reader,
		       struct squash_superblock *info)
{
	int fd = open_image(name);
	int rc;

	err[0] = '\0';
	CHECK(fd >= 0);
	rc = squash_superblock_check_fd(fd, reader, info, err, sizeof(err));
	close(fd);
	return rc;
}

/* Reads the superblock and the file size of DIR/NAME.sqfs. */
static void read_superblock(const char *name, uint8_t *sb, uint64_t *size)
{
	struct stat st;
	int fd = open_image(name);

	CHECK(fd >= 0);
	CHECK_INT(pread(fd, sb, SQUASH_SUPERBLOCK_SIZE, 0), SQUASH_SUPERBLOCK_SIZE);
	CHECK_INT(fstat(fd, &st), 0);
	*size = (uint64_t)st.st_size;
	close(fd);
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	put_le16(p, (uint16_t)v);
	put_le16(p + 2, (uint16_t)(v >> 16));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

static void test_real_images(void)
{
	static const char *const comps[] = { "gzip", "lzo", "xz", "lz4", "zstd" };
	struct squash_superblock info;
	size_t i;

	for (i = 0; i < sizeof(comps) / sizeof(comps[0]); i++) {
		CHECK_INT(make_image(comps[i], comps[i], NULL), 0);
		CHECK_INT(check_image(comps[i], SQUASH_READER_KERNEL, &info), 0);
		CHECK_INT(check_image(comps[i], SQUASH_READER_FUSE, &info), 0);
		CHECK_INT(check_image(comps[i], SQUASH_READER_ANY, &info), 0);
		CHECK_STR(squash_compression_name(info.compression), comps[i]);
		CHECK_INT(info.block_size, 131072);
		CHECK(info.inodes >= 3);
	}

	/* Optional tables absent. */
	CHECK_INT(make_image("bare", "gzip", "-no-fragments"), 0);
	CHECK_INT(check_image("bare", SQUASH_READER_ANY, NULL), 0);
	CHECK_INT(make_image("noexport", "gzip", "-no-exports"), 0);
	CHECK_INT(check_image("noexport", SQUASH_READER_ANY, NULL), 0);
	CHECK_INT(make_image("noxattr", "gzip", "-no-xattrs"), 0);
	CHECK_INT(check_image("noxattr", SQUASH_READER_ANY, NULL), 0);

	/* Legacy lzma: the kernel never reads it; the FUSE readers only
	 * through a libsquashfuse built with it (configure checks). Without,
	 * refused at submission with the way out. */
	CHECK_INT(make_image("lzma", "lzma", NULL), 0);
	CHECK_INT(check_image("lzma", SQUASH_READER_KERNEL, NULL), -1);
	CHECK_STR(err, "legacy lzma compression (mksquashfs -comp lzma) is not supported by the kernel: "
		       "repack the image with -comp xz");
#ifdef SQUASHFUSE_HAS_LZMA
	CHECK_INT(check_image("lzma", SQUASH_READER_FUSE, &info), 0);
	CHECK_INT(info.compression, SQUASH_COMP_LZMA);
	CHECK_INT(check_image("lzma", SQUASH_READER_ANY, NULL), 0);
#else
	CHECK_INT(check_image("lzma", SQUASH_READER_FUSE, NULL), -1);
	CHECK_STR(err, "legacy lzma compression (mksquashfs -comp lzma) is not supported by the FUSE reader: "
		       "repack the image with -comp xz");
	CHECK_INT(check_image("lzma", SQUASH_READER_ANY, NULL), -1);
	CHECK_STR(err, "legacy lzma compression (mksquashfs -comp lzma) is not supported by this node: "
		       "repack the image with -comp xz");
#endif
}

static const char *corrupt(const uint8_t *good, uint64_t size,
			   void (*edit)(uint8_t *sb), enum squash_reader reader)
{
	uint8_t sb[SQUASH_SUPERBLOCK_SIZE];

	memcpy(sb, good, sizeof(sb));
	edit(sb);
	err[0] = '\0';
	CHECK_INT(squash_superblock_check(sb, sizeof(sb), size, reader, NULL, err,
					  sizeof(err)), -1);
	return err;
}

static void bad_magic(uint8_t *sb) { memcpy(sb, "ELF\x7f", 4); }
/* An Apptainer SIF: its launch script, then SIF_MAGIC at byte 32. */
static void sif(uint8_t *sb) { memcpy(sb, "#!/usr/bin/env run-singularity\n\0SIF_MAGIC", 42); }
static void big_endian(uint8_t *sb) { memcpy(sb, "sqsh", 4); }
static void version_3_1(uint8_t *sb) { put_le16(sb + 28, 3); put_le16(sb + 30, 1); }
static void version_4_1(uint8_t *sb) { put_le16(sb + 30, 1); }
static void block_3000(uint8_t *sb) { put_le32(sb + 12, 3000); }
static void block_2048(uint8_t *sb) { put_le32(sb + 12, 2048); put_le16(sb + 22, 11); }
static void block_2m(uint8_t *sb) { put_le32(sb + 12, 2097152); put_le16(sb + 22, 21); }
static void block_log_wrong(uint8_t *sb) { put_le16(sb + 22, 16); }
static void block_log_huge(uint8_t *sb) { put_le16(sb + 22, 40); }
static void comp_7(uint8_t *sb) { put_le16(sb + 20, 7); }
static void comp_0(uint8_t *sb) { put_le16(sb + 20, 0); }
static void bytes_used_small(uint8_t *sb) { put_le64(sb + 40, 95); }
static void bytes_used_huge(uint8_t *sb) { put_le64(sb + 40, UINT64_MAX); }
static void inode_table_end(uint8_t *sb) { put_le64(sb + 64, UINT64_C(1) << 40); }
static void inode_table_absent(uint8_t *sb) { put_le64(sb + 64, UINT64_MAX); }
static void id_table_in_sb(uint8_t *sb) { put_le64(sb + 48, 10); }
static void fragment_table_end(uint8_t *sb) { put_le64(sb + 80, UINT64_MAX - 1); }
static void root_inode_bad(uint8_t *sb) { put_le64(sb + 32, 9000); }

static void test_corrupt_copies(void)
{
	uint8_t good[SQUASH_SUPERBLOCK_SIZE];
	char expect[256];
	uint64_t size;
	uint32_t bytes_used;

	read_superblock("gzip", good, &size);
	bytes_used = (uint32_t)(good[40] | good[41] << 8 | good[42] << 16 | good[43] << 24);
	CHECK_INT(squash_superblock_check(good, sizeof(good), size,
					  SQUASH_READER_ANY, NULL, err, sizeof(err)), 0);

	CHECK_STR(corrupt(good, size, bad_magic, SQUASH_READER_ANY),
		  "not a squashfs image (bad magic)");
	CHECK_STR(corrupt(good, size, sif, SQUASH_READER_ANY),
		  "an Apptainer SIF file, not a squashfs image: run it with apptainer exec; to use "
		  "software from it here, copy its directory out (apptainer build --sandbox) and "
		  "pack that with squash-pack");
	CHECK_STR(corrupt(good, size, big_endian, SQUASH_READER_ANY),
		  "big-endian squashfs (version 3 or older) is not supported (need 4.0)");
	CHECK_STR(corrupt(good, size, version_3_1, SQUASH_READER_ANY),
		  "squashfs version 3.1 is not supported (need 4.0)");
	CHECK_STR(corrupt(good, size, version_4_1, SQUASH_READER_ANY),
		  "squashfs version 4.1 is not supported (need 4.0)");
	CHECK_STR(corrupt(good, size, block_3000, SQUASH_READER_ANY),
		  "block size 3000 is invalid");
	CHECK_STR(corrupt(good, size, block_2048, SQUASH_READER_ANY),
		  "block size 2048 is invalid");
	CHECK_STR(corrupt(good, size, block_2m, SQUASH_READER_ANY),
		  "block size 2097152 is invalid");
	CHECK_STR(corrupt(good, size, block_log_wrong, SQUASH_READER_ANY),
		  "block size 131072 is invalid (block_log is 16)");
	CHECK_STR(corrupt(good, size, block_log_huge, SQUASH_READER_ANY),
		  "block size 131072 is invalid (block_log is 40)");
	CHECK_STR(corrupt(good, size, comp_7, SQUASH_READER_FUSE),
		  "unknown compression (id 7)");
	CHECK_STR(corrupt(good, size, comp_0, SQUASH_READER_ANY),
		  "unknown compression (id 0)");
	CHECK_STR(corrupt(good, size, bytes_used_small, SQUASH_READER_ANY),
		  "image is corrupt: superblock says 95 bytes, less than the superblock itself");
	snprintf(expect, sizeof(expect),
		 "image is truncated: superblock says 18446744073709551615 bytes, file has %llu",
		 (unsigned long long)size);
	CHECK_STR(corrupt(good, size, bytes_used_huge, SQUASH_READER_ANY), expect);
	snprintf(expect, sizeof(expect),
		 "image is corrupt: inode table offset 1099511627776 is outside the image (%u bytes)",
		 bytes_used);
	CHECK_STR(corrupt(good, size, inode_table_end, SQUASH_READER_ANY), expect);
	CHECK_CONTAINS(corrupt(good, size, inode_table_absent, SQUASH_READER_ANY),
		       "inode table offset 18446744073709551615 is outside");
	CHECK_CONTAINS(corrupt(good, size, id_table_in_sb, SQUASH_READER_ANY),
		       "id table offset 10 is outside");
	CHECK_CONTAINS(corrupt(good, size, fragment_table_end, SQUASH_READER_ANY),
		       "fragment table offset");
	CHECK_STR(corrupt(good, size, root_inode_bad, SQUASH_READER_ANY),
		  "image is corrupt: bad root inode");

	CHECK_INT(squash_superblock_check(good, 95, size, SQUASH_READER_ANY, NULL,
					  err, sizeof(err)), -1);
	CHECK_STR(err, "not a squashfs image (only 95 bytes, a superblock has 96)");
	/* NULL err is allowed: callers that only want the verdict. */
	CHECK_INT(squash_superblock_check(good, 95, size, SQUASH_READER_ANY, NULL,
					  NULL, 0), -1);
}

static void test_files(void)
{
	char path[256], expect[256];
	uint8_t sb[SQUASH_SUPERBLOCK_SIZE];
	uint64_t size;
	int fd;

	/* A truncated copy: the first 1000 bytes of a real image. */
	read_superblock("gzip", sb, &size);
	snprintf(path, sizeof(path), "%s/truncated.sqfs", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	{
		uint8_t head[1000];
		int src = open_image("gzip");

		CHECK_INT(pread(src, head, sizeof(head), 0), sizeof(head));
		CHECK_INT(write(fd, head, sizeof(head)), sizeof(head));
		close(src);
	}
	close(fd);
	CHECK(size > 1000);
	CHECK_INT(check_image("truncated", SQUASH_READER_ANY, NULL), -1);
	snprintf(expect, sizeof(expect),
		 "image is truncated: superblock says %llu bytes, file has 1000",
		 (unsigned long long)(sb[40] | sb[41] << 8 | sb[42] << 16));
	CHECK_STR(err, expect);

	/* An empty file and a directory. */
	snprintf(path, sizeof(path), "%s/empty.sqfs", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	close(fd);
	CHECK_INT(check_image("empty", SQUASH_READER_ANY, NULL), -1);
	CHECK_STR(err, "not a squashfs image (only 0 bytes, a superblock has 96)");

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK_INT(squash_superblock_check_fd(fd, SQUASH_READER_ANY, NULL, err,
					     sizeof(err)), -1);
	CHECK_STR(err, "not a regular file");
	close(fd);
}

static void test_compression_table(void)
{
#ifdef SQUASHFUSE_HAS_LZMA
	CHECK(squash_compression_supported(SQUASH_COMP_LZMA, SQUASH_READER_FUSE));
	CHECK(squash_compression_supported(SQUASH_COMP_LZMA, SQUASH_READER_ANY));
#else
	CHECK(!squash_compression_supported(SQUASH_COMP_LZMA, SQUASH_READER_FUSE));
	CHECK(!squash_compression_supported(SQUASH_COMP_LZMA, SQUASH_READER_ANY));
#endif
	CHECK(!squash_compression_supported(SQUASH_COMP_LZMA, SQUASH_READER_KERNEL));
	CHECK(squash_compression_supported(SQUASH_COMP_ZSTD, SQUASH_READER_KERNEL));
	CHECK(!squash_compression_supported(0, SQUASH_READER_ANY));
	CHECK(!squash_compression_supported(7, SQUASH_READER_FUSE));
	CHECK_STR(squash_compression_name(SQUASH_COMP_XZ), "xz");
	CHECK_STR(squash_compression_name(99), "unknown");
}

static int write_random(const char *path, size_t size)
{
	uint8_t chunk[4096];
	int in = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t done;
	int rc = 0;

	for (done = 0; done < size && rc == 0; done += sizeof(chunk))
		if (in < 0 || out < 0 || read(in, chunk, sizeof(chunk)) != sizeof(chunk) ||
		    write(out, chunk, sizeof(chunk)) != sizeof(chunk))
			rc = -1;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

static void remove_dir(void)
{
	char *argv[] = { "rm", "-rf", dir, NULL };

	run(argv);
}

int main(void)
{
	char path[256];
	FILE *f;
	char *probe[] = { "mksquashfs", "-version", NULL };

	test_compression_table();
	if (run(probe) != 0) {
		fprintf(stderr, "mksquashfs not found: skipping image tests\n");
		return unit_failures ? 1 : 77;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/tree", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/tree/hello.txt", dir);
	f = fopen(path, "w");
	fputs("hello from a squashfs image\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/tree/sub", dir);
	mkdir(path, 0700);
	/* Incompressible data, so images are larger than the truncated copy. */
	snprintf(path, sizeof(path), "%s/tree/sub/random.bin", dir);
	if (write_random(path, 64 * 1024) < 0) {
		perror(path);
		return 1;
	}

	test_real_images();
	test_corrupt_copies();
	test_files();
	remove_dir();
	return unit_exit_code();
}

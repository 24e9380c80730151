/* The one superblock validator (proto/squashfs_format.c,
 * squash_superblock_read): a superblock built here field by field is
 * accepted and decoded, and each field made wrong in turn is refused with
 * its reason. Also the little-endian helpers, at any alignment. No
 * mksquashfs needed (test_superblock reads real images). */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "squashfs_format.h"
#include "unit.h"

#define BYTES_USED 100000u
#define FILE_SIZE 102400u

static char err[256];

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }

/* The layout mksquashfs writes: inodes, directories, fragments, export,
 * ids, xattrs, from 96 bytes on. */
static void good_superblock(uint8_t *sb)
{
	memset(sb, 0, SQUASH_SUPERBLOCK_SIZE);
	put32(sb + 0, 0x73717368);  /* magic */
	put32(sb + 4, 7);           /* inodes */
	put32(sb + 12, 131072);     /* block size */
	put32(sb + 16, 2);          /* fragments */
	put16(sb + 20, SQUASH_COMP_ZSTD);
	put16(sb + 22, 17);         /* block log */
	put16(sb + 24, 0x00c0);     /* duplicates, exportable */
	put16(sb + 26, 1);          /* ids */
	put16(sb + 28, 4);
	put16(sb + 30, 0);
	put64(sb + 32, (UINT64_C(64) << 16) | 32); /* root inode */
	put64(sb + 40, BYTES_USED);
	put64(sb + 64, 50000);      /* inode table */
	put64(sb + 72, 60000);      /* directory table */
	put64(sb + 80, 70000);      /* fragment table */
	put64(sb + 88, 80000);      /* export table */
	put64(sb + 48, 90000);      /* id table */
	put64(sb + 56, 95000);      /* xattr table */
}

/* The reason squash_superblock_read gives for a good superblock with one
 * edit, or "accepted". */
static const char *refusal(void (*edit)(uint8_t *sb))
{
	uint8_t sb[SQUASH_SUPERBLOCK_SIZE];
	struct squash_superblock out;

	good_superblock(sb);
	edit(sb);
	err[0] = '\0';
	if (squash_superblock_read(sb, sizeof(sb), FILE_SIZE, &out, err, sizeof(err)) == 0)
		return "accepted";
	return err;
}

static void nothing(uint8_t *sb) { (void)sb; }
static void bad_magic(uint8_t *sb) { put32(sb, 0x73717369); }
static void version_4_1(uint8_t *sb) { put16(sb + 30, 1); }
static void block_log_disagrees(uint8_t *sb) { put16(sb + 22, 16); }
static void block_not_power_of_two(uint8_t *sb) { put32(sb + 12, 131073); }
static void compression_7(uint8_t *sb) { put16(sb + 20, 7); }
static void flag_beyond_4_0(uint8_t *sb) { put16(sb + 24, 0x0800); }
static void every_known_flag(uint8_t *sb) { put16(sb + 24, 0x07ff); }
static void bytes_used_past_file(uint8_t *sb) { put64(sb + 40, FILE_SIZE + 1); }
static void bytes_used_whole_file(uint8_t *sb) { put64(sb + 40, FILE_SIZE); }
static void id_table_at_end(uint8_t *sb) { put64(sb + 48, BYTES_USED); }
static void directory_before_inodes(uint8_t *sb) { put64(sb + 72, 40000); }
static void no_ids(uint8_t *sb) { put16(sb + 26, 0); }
static void fragments_without_table(uint8_t *sb) { put64(sb + 80, SQUASH_TABLE_ABSENT); }
static void no_fragments_no_table(uint8_t *sb) { put32(sb + 16, 0); put64(sb + 80, SQUASH_TABLE_ABSENT); }
static void optional_tables_absent(uint8_t *sb) { put64(sb + 88, SQUASH_TABLE_ABSENT); put64(sb + 56, SQUASH_TABLE_ABSENT); }
static void root_offset_a_whole_block(uint8_t *sb) { put64(sb + 32, (UINT64_C(64) << 16) | 8192); }
static void root_past_inode_table(uint8_t *sb) { put64(sb + 32, UINT64_C(10000) << 16); }

static void test_a_good_superblock_is_decoded(void)
{
	uint8_t sb[SQUASH_SUPERBLOCK_SIZE];
	struct squash_superblock out;

	good_superblock(sb);
	CHECK_INT(squash_superblock_read(sb, sizeof(sb), FILE_SIZE, &out, err, sizeof(err)), 0);
	CHECK_INT(out.inodes, 7);
	CHECK_INT(out.block_size, 131072);
	CHECK_INT(out.block_log, 17);
	CHECK_INT(out.fragments, 2);
	CHECK_INT(out.compression, SQUASH_COMP_ZSTD);
	CHECK_INT(out.flags, 0x00c0);
	CHECK_INT(out.no_ids, 1);
	CHECK_INT(out.root_inode, (UINT64_C(64) << 16) | 32);
	CHECK_INT(out.bytes_used, BYTES_USED);
	CHECK_INT(out.inode_table, 50000);
	CHECK_INT(out.directory_table, 60000);
	CHECK_INT(out.fragment_table, 70000);
	CHECK_INT(out.export_table, 80000);
	CHECK_INT(out.id_table, 90000);
	CHECK_INT(out.xattr_table, 95000);
}

static void test_each_wrong_field_is_refused_with_its_reason(void)
{
	static const struct {
		void (*edit)(uint8_t *sb);
		const char *reason; /* or "accepted" */
	} cases[] = {
		{ nothing, "accepted" },
		{ bad_magic, "not a squashfs image (bad magic)" },
		{ version_4_1, "squashfs version 4.1 is not supported (need 4.0)" },
		{ block_log_disagrees, "block size 131072 is invalid (block_log is 16)" },
		{ block_not_power_of_two, "block size 131073 is invalid" },
		{ compression_7, "unknown compression (id 7)" },
		{ flag_beyond_4_0, "image is corrupt: unknown superblock flags 0x0800" },
		{ every_known_flag, "accepted" },
		{ bytes_used_past_file, "image is truncated: superblock says 102401 bytes, file has 102400" },
		{ bytes_used_whole_file, "accepted" },
		{ id_table_at_end, "image is corrupt: id table offset 100000 is outside the image (100000 bytes)" },
		{ directory_before_inodes,
		  "image is corrupt: the inode table does not come before the directory table" },
		{ no_ids, "image is corrupt: no uid/gid table entries" },
		{ fragments_without_table, "image is corrupt: fragment table offset 18446744073709551615 "
					   "is outside the image (100000 bytes)" },
		{ no_fragments_no_table, "accepted" },
		{ optional_tables_absent, "accepted" },
		{ root_offset_a_whole_block, "image is corrupt: bad root inode" },
		{ root_past_inode_table, "image is corrupt: bad root inode" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_STR(refusal(cases[i].edit), cases[i].reason);
}

static void test_a_short_buffer_is_not_a_superblock(void)
{
	uint8_t sb[SQUASH_SUPERBLOCK_SIZE];
	struct squash_superblock out;

	good_superblock(sb);
	CHECK_INT(squash_superblock_read(sb, 95, FILE_SIZE, &out, err, sizeof(err)), -1);
	CHECK_STR(err, "not a squashfs image (only 95 bytes, a superblock has 96)");
	/* Callers that only want the verdict pass no buffer. */
	CHECK_INT(squash_superblock_read(sb, 0, FILE_SIZE, &out, NULL, 0), -1);
}

static void test_little_endian_fields_read_at_any_alignment(void)
{
	uint8_t b[1 + 8] = { 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88 };

	CHECK_INT(le16(b + 1), 0x0201);
	CHECK_INT(le32(b + 1), 0x04030201);
	CHECK(le64(b + 1) == UINT64_C(0x8807060504030201));
	CHECK_STR(squash_compression_name(SQUASH_COMP_LZ4), "lz4");
	CHECK_STR(squash_compression_name(0), "unknown");
}

int main(void)
{
	test_a_good_superblock_is_decoded();
	test_each_wrong_field_is_refused_with_its_reason();
	test_a_short_buffer_is_not_a_superblock();
	test_little_endian_fields_read_at_any_alignment();
	return unit_exit_code();
}

/* squash-reader's image layer: directory listings and lookups (image.h). */
#include "config.h"

#include "reader/image.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "reader/image_format.h"

static int dir_header(struct image *img, struct dir_iter *it)
{
	unsigned char h[12];
	uint32_t count;
	int r;

	if (it->end - it->pos < 12)
		return -EIO;
	if ((r = md_read(img, &it->cur, h, 12)) < 0)
		return r;
	count = le32(h);
	if (count >= DIR_MAX_ENTRIES)
		return -EIO;
	it->hdr_pos = it->pos;
	it->pos += 12;
	it->left = count + 1;
	it->hdr_block = le32(h + 4);
	it->hdr_ino = le32(h + 8);
	return 0;
}

/* Reads the entry at the cursor; name NULL skips the name. */
static int dir_entry_read(struct image *img, struct dir_iter *it, struct dir_entry *e)
{
	unsigned char f[8];
	size_t namelen;
	int r;

	if (it->end - it->pos < 8)
		return -EIO;
	if ((r = md_read(img, &it->cur, f, 8)) < 0)
		return r;
	namelen = (size_t)le16(f + 6) + 1;
	if (namelen > NAME_MAX_LEN || it->end - it->pos - 8 < namelen)
		return -EIO;
	if ((r = md_read(img, &it->cur, e ? e->name : NULL, namelen)) < 0)
		return r;
	it->pos += 8 + namelen;
	it->left--;
	if (!e)
		return 0;
	e->name[namelen] = '\0';
	e->namelen = namelen;
	e->id = ((uint64_t)it->hdr_block << 16) | le16(f);
	e->ino = it->hdr_ino + (uint32_t)(int32_t)(int16_t)le16(f + 2);
	e->type = le16(f + 4);
	e->cookie = (it->hdr_pos << 32) | it->pos;
	/* Names the kernel would refuse, or that would step out of the tree. */
	if (memchr(e->name, '/', namelen) || memchr(e->name, '\0', namelen) ||
	    !strcmp(e->name, ".") || !strcmp(e->name, "..") || e->type < 1 || e->type > 14)
		return -EIO;
	return 0;
}

int dir_open(struct image *img, const struct inode *dir, uint64_t cookie, struct dir_iter *it)
{
	uint64_t hdr_pos, entry_pos;
	int r;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	memset(it, 0, sizeof(*it));
	it->cur.block = dir->start;
	it->cur.offset = dir->dir_offset;
	/* The size counts "." and ".." as 3 bytes. */
	it->end = dir->size >= 3 ? dir->size - 3 : 0;
	if (it->end >= (1ull << 31))
		return -EIO;
	if (cookie < 3)
		return 0;
	hdr_pos = cookie >> 32;
	entry_pos = cookie & 0xffffffffu;
	if (hdr_pos >= entry_pos || entry_pos > it->end)
		return -EINVAL;
	if ((r = md_read(img, &it->cur, NULL, hdr_pos)) < 0)
		return r;
	it->pos = hdr_pos;
	if ((r = dir_header(img, it)) < 0)
		return r;
	while (it->pos < entry_pos) {
		if (it->left == 0)
			return -EINVAL;
		if ((r = dir_entry_read(img, it, NULL)) < 0)
			return r;
	}
	return it->pos == entry_pos ? 0 : -EINVAL;
}

int dir_next(struct image *img, struct dir_iter *it, struct dir_entry *out)
{
	int r;

	if (it->left == 0) {
		if (it->pos >= it->end)
			return 0;
		if ((r = dir_header(img, it)) < 0)
			return r;
	}
	if ((r = dir_entry_read(img, it, out)) < 0)
		return r;
	return 1;
}

/* A large directory's index (after its inode, dir->dir_index entries):
 * for each metadata block of the listing after the first, the listing
 * position of the header that starts in it, the block (from the
 * directory table's start) and that header's first name. Moves the
 * iterator to the last header whose first name sorts before or at name,
 * as the kernel does (squashfs_lookup); the scan goes on from there. An
 * index that cannot be right (out of order, past the listing or the
 * table) is EIO; one with more entries than the listing has blocks is
 * ignored (the scan then starts at the beginning, as without one). */
static int dir_index_seek(struct image *img, const struct inode *dir, const char *name,
			  struct dir_iter *it)
{
	struct md_cursor cur = dir->tail;
	uint64_t pos = 0;
	uint32_t block = 0;
	bool found = false;
	int r;

	if (dir->dir_index > it->end / SQUASH_METADATA_SIZE + 1)
		return 0;
	for (unsigned i = 0; i < dir->dir_index; i++) {
		unsigned char h[12];
		char iname[NAME_MAX_LEN + 1];
		uint32_t size, at;

		if ((r = md_read(img, &cur, h, 12)) < 0)
			return r;
		at = le32(h);
		size = le32(h + 8) + 1;
		if (size == 0 || size > NAME_MAX_LEN)
			return -EIO;
		if ((r = md_read(img, &cur, iname, size)) < 0)
			return r;
		iname[size] = '\0';
		if (strcmp(iname, name) > 0)
			break;
		if (at >= it->end || (found && at <= pos) ||
		    le32(h + 4) >= img->bytes_used - img->dir_start)
			return -EIO;
		pos = at;
		block = le32(h + 4);
		found = true;
	}
	if (!found)
		return 0;
	it->cur.block = img->dir_start + block;
	it->cur.offset = (uint32_t)((dir->dir_offset + pos) % SQUASH_METADATA_SIZE);
	it->pos = pos;
	it->left = 0;
	return 0;
}

int dir_lookup(struct image *img, const struct inode *dir, const char *name, uint64_t *id)
{
	struct dir_iter it;
	struct dir_entry e;
	int r;

	if (strlen(name) > NAME_MAX_LEN)
		return -ENAMETOOLONG;
	if ((r = dir_open(img, dir, 0, &it)) < 0)
		return r;
	if (dir->dir_index > 0 && (r = dir_index_seek(img, dir, name, &it)) < 0)
		return r;
	while ((r = dir_next(img, &it, &e)) > 0) {
		int c = strcmp(name, e.name);

		if (c == 0) {
			*id = e.id;
			return 0;
		}
		/* mksquashfs sorts entries by name (so does the kernel's lookup
		 * rely on it). */
		if (c < 0)
			return -ENOENT;
	}
	return r < 0 ? r : -ENOENT;
}

mode_t dir_entry_mode(unsigned type)
{
	/* basic and extended types: 1-7 and 8-14 */
	switch (type) {
	case 1: case 8: return S_IFDIR;
	case 2: case 9: return S_IFREG;
	case 3: case 10: return S_IFLNK;
	case 4: case 11: return S_IFBLK;
	case 5: case 12: return S_IFCHR;
	case 6: case 13: return S_IFIFO;
	default: return S_IFSOCK;
	}
}

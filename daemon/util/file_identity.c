#include "config.h"

#include "util/file_identity.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x1000U
#endif

/* glibc's struct statx (2.36) ends its named fields at stx_dev_minor; the
 * kernel's stx_mnt_id follows it, at the same offset in both (144). */
static uint64_t statx_mnt_id(const struct statx *sx)
{
	uint64_t id;

	memcpy(&id, (const char *)&sx->stx_dev_minor + sizeof(sx->stx_dev_minor), sizeof(id));
	return id;
}

int file_identity_of(int fd, struct file_identity *id, struct stat *st)
{
	struct statx sx;

	memset(&sx, 0, sizeof(sx));
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC,
		  STATX_BASIC_STATS | STATX_MNT_ID, &sx) < 0)
		return -1;
	id->dev_major = sx.stx_dev_major;
	id->dev_minor = sx.stx_dev_minor;
	id->ino = sx.stx_ino;
	id->has_mnt_id = (sx.stx_mask & STATX_MNT_ID) != 0;
	id->mnt_id = id->has_mnt_id ? statx_mnt_id(&sx) : 0;
	if (st) {
		memset(st, 0, sizeof(*st));
		st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
		st->st_ino = sx.stx_ino;
		st->st_mode = sx.stx_mode;
		st->st_nlink = sx.stx_nlink;
		st->st_uid = sx.stx_uid;
		st->st_gid = sx.stx_gid;
		st->st_size = (off_t)sx.stx_size;
		st->st_mtim.tv_sec = sx.stx_mtime.tv_sec;
		st->st_mtim.tv_nsec = sx.stx_mtime.tv_nsec;
	}
	return 0;
}

bool file_identity_same(const struct file_identity *a, const struct file_identity *b)
{
	return a->has_mnt_id && b->has_mnt_id && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && a->ino == b->ino && a->mnt_id == b->mnt_id;
}

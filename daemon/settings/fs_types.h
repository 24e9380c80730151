/* The file system types kernel mounts may read from (squashd.conf's
 * kernel_fs_types): names over a fixed table of superblock magics
 * (statfs f_type), so the check is on the file's own superblock. FUSE is
 * not in the table: bytes a FUSE server returns are never trusted. */
#ifndef SQUASHD_FS_TYPES_H
#define SQUASHD_FS_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "ext4 xfs ..." (space or comma separated) to a mask. Returns 0, or -1
 * with err naming the unknown name and the known ones. */
int fs_types_parse(const char *text, uint32_t *mask, char *err, size_t errlen);
/* The mask as names, space separated. */
void fs_types_describe(uint32_t mask, char *buf, size_t len);
/* Local and cluster file systems: every name of the table. */
uint32_t fs_types_default(void);
/* Whether a file system of this f_type is in mask; *name is its name, or
 * "fuse" or "type 0x..." (a static or per-thread buffer) when it is not
 * in the table. */
bool fs_types_allows(uint32_t mask, long f_type, const char **name);

#endif

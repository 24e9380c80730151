#include "config.h"

#include "settings/fs_types.h"

#include <stdio.h>
#include <string.h>

/* Superblock magics (linux/magic.h, and the cluster file systems' own). */
static const struct {
	const char *name;
	unsigned long magic;
} table[] = {
	{ "ext4", 0xEF53 },	   /* ext2, ext3 and ext4 share it */
	{ "xfs", 0x58465342 },
	{ "btrfs", 0x9123683E },
	{ "tmpfs", 0x01021994 },
	{ "zfs", 0x2FC12FC1 },
	/* Network file systems: an explicit choice (not in the default).
	 * "Owned by uid 0" there is whatever a client with no_root_squash
	 * wrote, and NFSv4 or GPFS ACLs may grant write the mode does not show. */
#define N_LOCAL 5
	{ "nfs", 0x6969 },
	{ "lustre", 0x0BD00BD0 },
	{ "gpfs", 0x47504653 },
	{ "beegfs", 0x19830326 },
	{ "cephfs", 0x00C36400 },
};
#define N_TYPES (sizeof(table) / sizeof(table[0]))

#define FUSE_MAGIC 0x65735546UL

int fs_types_parse(const char *text, uint32_t *mask, char *err, size_t errlen)
{
	char buf[512], *save = NULL;
	uint32_t m = 0;

	if (strlen(text) >= sizeof(buf)) {
		snprintf(err, errlen, "kernel_fs_types is too long");
		return -1;
	}
	strcpy(buf, text);
	for (char *w = strtok_r(buf, " ,\t", &save); w; w = strtok_r(NULL, " ,\t", &save)) {
		size_t i;

		for (i = 0; i < N_TYPES && strcmp(table[i].name, w); i++)
			;
		if (i == N_TYPES) {
			char known[256];

			fs_types_describe((1u << N_TYPES) - 1, known, sizeof(known));
			snprintf(err, errlen, "kernel_fs_types: '%s' is not a file system kernel mounts may read from%s (known: %s)",
				 w, strncmp(w, "fuse", 4) ? "" : ": a FUSE server's bytes are never trusted",
				 known);
			return -1;
		}
		m |= 1u << i;
	}
	*mask = m;
	return 0;
}

void fs_types_describe(uint32_t mask, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_TYPES && used < len; i++)
		if (mask & (1u << i))
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " " : "",
						 table[i].name);
}

uint32_t fs_types_default(void)
{
	return (1u << N_LOCAL) - 1;
}

bool fs_types_allows(uint32_t mask, long f_type, const char **name)
{
	static __thread char other[32];
	unsigned long t = (unsigned long)f_type & 0xffffffffUL;

	for (size_t i = 0; i < N_TYPES; i++)
		if (table[i].magic == t) {
			*name = table[i].name;
			return (mask & (1u << i)) != 0;
		}
	if (t == FUSE_MAGIC) {
		*name = "fuse";
		return false;
	}
	snprintf(other, sizeof(other), "type 0x%lx", t);
	*name = other;
	return false;
}

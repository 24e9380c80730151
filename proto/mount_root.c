#include "config.h"
#include "mount_root.h"

#include <fcntl.h>
#include <sys/stat.h>

bool squash_is_mount_root(int dirfd, const char *path)
{
	struct statx stx;

	if (statx(dirfd, path, path[0] ? 0 : AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) != 0 ||
	    !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return true;
	return stx.stx_attributes & STATX_ATTR_MOUNT_ROOT;
}

#include "config.h"
#include "mount/private_roots.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "mount/unmount.h"
#include "util/log.h"

/* Whether dir is a mount point, and whether anything is mounted below
 * it, from one read of mountinfo. -1 when it cannot be read. */
static int look(const char *dir, bool *is_mount, bool *below)
{
	struct mount_points mp;
	size_t len = strlen(dir);

	if (mount_points_read(&mp) < 0)
		return -1;
	*is_mount = mount_points_has(&mp, dir);
	*below = false;
	for (size_t i = 0; i < mp.n && !*below; i++)
		*below = !strncmp(mp.paths[i], dir, len) && mp.paths[i][len] == '/';
	mount_points_free(&mp);
	return 0;
}

int private_root_make(const char *dir, char *why, size_t whylen)
{
	bool is_mount, below;

	if (look(dir, &is_mount, &below) < 0) {
		snprintf(why, whylen, "cannot read squashd's mountinfo to make %s private", dir);
		return -1;
	}
	if (!is_mount && below)
		return 1;
	if (!is_mount && mount(dir, dir, NULL, MS_BIND, NULL) < 0) {
		snprintf(why, whylen, "cannot bind %s onto itself: %s", dir, strerror(errno));
		return -1;
	}
	if (mount(NULL, dir, NULL, MS_PRIVATE, NULL) < 0) {
		snprintf(why, whylen, "cannot make %s a private mount: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Whether dir's mount is a bind of the file system it lies on (as
 * private_root_make makes it), not one the admin put there. */
static bool bound_onto_itself(const char *dir)
{
	char parent[4096];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", dir);
	return stat(dir, &a) == 0 && stat(parent, &b) == 0 && a.st_dev == b.st_dev;
}

void private_root_release(const char *dir)
{
	bool is_mount, below;

	if (look(dir, &is_mount, &below) < 0 || !is_mount || below || !bound_onto_itself(dir))
		return;
	if (umount2(dir, UMOUNT_NOFOLLOW) < 0)
		log_warning("cannot unbind %s: %s", dir, strerror(errno));
}

#include "config.h"
#include "user_fuse.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int squash_mount_lookup(uint64_t mnt_id, char *fstype, size_t fstype_len, char *opts, size_t opts_len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		char *end;
		unsigned long long id = strtoull(line, &end, 10);
		char *sep = strstr(line, " - ");
		if (end == line || id != mnt_id || !sep)
			continue;
		/* After " - ": fstype, source, super options (user_id=, allow_other). */
		char type[64] = "", source[16], super[1024] = "";
		if (sscanf(sep + 3, "%63s %15s %1023s", type, source, super) < 1)
			break;
		snprintf(fstype, fstype_len, "%s", type);
		if (opts)
			snprintf(opts, opts_len, "%s", super);
		found = 1;
		break;
	}
	if (!found && ferror(f))
		found = -1;
	free(line);
	fclose(f);
	return found;
}

bool squash_fstype_is_fuse(const char *fstype)
{
	return !strcmp(fstype, "fuse") || !strncmp(fstype, "fuse.", 5) || !strcmp(fstype, "fuseblk");
}

bool squash_on_user_fuse(int fd, long *owner)
{
	struct statx sx;
	char fstype[64], opts[1024];

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) != 0 ||
	    !(sx.stx_mask & STATX_MNT_ID))
		return false;
	switch (squash_mount_lookup(sx.stx_mnt_id, fstype, sizeof(fstype), opts, sizeof(opts))) {
	case 0:
		/* Not in this namespace: reached through another one (a path
		 * through /proc/PID/root), where a user may have mounted anything. */
		*owner = SQUASH_MOUNT_ELSEWHERE;
		return true;
	case 1:
		break;
	default:
		return false;
	}
	if (!squash_fstype_is_fuse(fstype))
		return false;
	char *u = strstr(opts, "user_id=");
	long uid = u ? strtol(u + 8, NULL, 10) : 0;
	bool allow_other = false;
	char *save = NULL;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
		allow_other |= !strcmp(o, "allow_other");
	*owner = uid != 0 ? uid : -1;
	return uid != 0 || !allow_other;
}

void squash_user_fuse_reason(long owner, char *buf, size_t len)
{
	if (owner == SQUASH_MOUNT_ELSEWHERE)
		snprintf(buf, len, "is on a mount of another mount namespace (a path through /proc/PID/root?), "
			 "where its file system cannot be told; squashd does not open images there (use a path "
			 "every process on the node sees)");
	else if (owner >= 0)
		snprintf(buf, len, "is on a FUSE file system that uid %ld mounted; squashd does not open images "
			 "served by a user's FUSE server (copy it to a normal file system)", owner);
	else
		snprintf(buf, len, "is on a FUSE file system mounted without allow_other; squashd does not "
			 "open images there (copy it to a normal file system)");
}

bool squash_user_fuse_path(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	long owner;
	bool user;

	if (fd < 0)
		return false;
	user = squash_on_user_fuse(fd, &owner);
	close(fd);
	if (user)
		squash_user_fuse_reason(owner, buf, len);
	return user;
}

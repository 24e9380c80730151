#include "config.h"
#include "mount/overlay_lowers.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* The kernel's own words about a failed fsconfig, appended to err. */
static void fs_log(int fs, char *err, size_t errlen)
{
	char line[512];
	size_t used = strlen(err);
	ssize_t n;

	while (used + 4 < errlen && (n = read(fs, line, sizeof(line) - 1)) > 0) {
		line[n] = '\0';
		line[strcspn(line, "\n")] = '\0';
		int w = snprintf(err + used, errlen - used, " (%s)", line[0] && line[1] == ' ' ? line + 2 : line);
		if (w < 0)
			break;
		used += (size_t)w < errlen - used ? (size_t)w : errlen - used - 1;
	}
}

/* mount(2) with one "lowerdir=top:...:bottom" option (kernels without
 * lowerdir+). */
static enum result legacy_mount(const char *point, const char *const *lowers, size_t n,
				char *err, size_t errlen)
{
	size_t cap = (size_t)sysconf(_SC_PAGESIZE), used;
	char *opts = malloc(cap);

	if (!opts) {
		snprintf(err, errlen, "out of memory");
		return RESULT_NODE_ERROR;
	}
	used = (size_t)snprintf(opts, cap, "redirect_dir=nofollow,metacopy=off,lowerdir=");
	for (size_t i = n; i-- > 0;) {
		size_t len = strlen(lowers[i]);
		if (strpbrk(lowers[i], ",:\\")) {
			snprintf(err, errlen, "cannot merge %s: state_dir must not contain ',', ':' or '\\'",
				 lowers[i]);
			free(opts);
			return RESULT_NODE_ERROR;
		}
		if (used + len + 2 >= cap) {
			snprintf(err, errlen, "%zu images cannot be merged at one target on this kernel: "
				 "their layers do not fit overlayfs' option page (%zu bytes); Linux 6.8 and "
				 "later take any number up to %d", n, cap, OVERLAY_LOWERS_MAX);
			free(opts);
			return RESULT_USER_ERROR;
		}
		memcpy(opts + used, lowers[i], len);
		used += len;
		opts[used++] = i ? ':' : '\0';
	}
	opts[used] = '\0';
	int rc = mount("overlay", point, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts);
	int saved = errno;
	free(opts);
	if (rc < 0) {
		snprintf(err, errlen, "cannot mount the merged overlay on %s: %s", point, strerror(saved));
		return RESULT_NODE_ERROR;
	}
	return RESULT_OK;
}

/* An overlayfs context of the new mount API, or -1 where there is none.
 * Before Linux 6.5 overlayfs had no fs_context of its own: fsopen() then
 * gives the generic legacy one, which takes any key (it only appends
 * "key=value" to the option page) and fails only at FSCONFIG_CMD_CREATE
 * (found on Debian 12's 6.1). A key no file system has tells them apart. */
static int overlay_fs_context(void)
{
	int fs = fsopen("overlay", FSOPEN_CLOEXEC);

	if (fs < 0)
		return -1;
	if (fsconfig(fs, FSCONFIG_SET_FLAG, "squashd_probe_no_such_option", NULL, 0) == 0) {
		close(fs); /* legacy: mount(2) it is */
		return -1;
	}
	/* Refused as it should be; a fresh context, without the refusal in its log. */
	close(fs);
	return fsopen("overlay", FSOPEN_CLOEXEC);
}

/* One overlay of at most OVERLAY_LOWERS_PER_MOUNT lowers. */
static enum result mount_one(const char *point, const char *const *lowers, size_t n, char *err,
			     size_t errlen)
{
	int fs = overlay_fs_context();

	if (fs < 0)
		return legacy_mount(point, lowers, n, err, errlen);
	/* The top layer first: each lowerdir+ goes below the ones before. */
	for (size_t i = n; i-- > 0;) {
		if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", lowers[i], 0) == 0)
			continue;
		if (i == n - 1 && errno == EINVAL) { /* no lowerdir+ (before 6.8) */
			close(fs);
			return legacy_mount(point, lowers, n, err, errlen);
		}
		snprintf(err, errlen, "cannot merge %s: %s", lowers[i], strerror(errno));
		fs_log(fs, err, errlen);
		close(fs);
		return RESULT_NODE_ERROR;
	}
	int mnt = -1;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "redirect_dir", "nofollow", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "metacopy", "off", 0) < 0 ||
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
			   MOUNT_ATTR_NODEV)) < 0 ||
	    move_mount(mnt, "", AT_FDCWD, point, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
		snprintf(err, errlen, "cannot mount the merged overlay of %zu images on %s: %s", n, point,
			 strerror(errno));
		fs_log(fs, err, errlen);
		if (mnt >= 0)
			close(mnt);
		close(fs);
		return RESULT_NODE_ERROR;
	}
	close(mnt);
	close(fs);
	return RESULT_OK;
}

enum result overlay_mount_lowers(const char *point, const char *const *lowers, size_t n,
				 char *err, size_t errlen)
{
	if (n == 0 || n > OVERLAY_LOWERS_MAX) {
		snprintf(err, errlen, "%zu images cannot be merged at one target (overlayfs stacks at "
			 "most %d layers in %d mounts of %d)", n, OVERLAY_LOWERS_MAX,
			 OVERLAY_LOWERS_PER_MOUNT, OVERLAY_LOWERS_PER_MOUNT);
		return RESULT_USER_ERROR;
	}
	/* A FUSE mount's root has the mode of its mount option (rootmode=40000:
	 * no permissions) until its first GETATTR, and overlayfs keeps what it
	 * sees when it mounts: ask each root for its attributes first. */
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(lowers[i], &st) < 0) {
			snprintf(err, errlen, "cannot read the root of %s: %s", lowers[i], strerror(errno));
			return RESULT_NODE_ERROR;
		}
	}
	if (n <= OVERLAY_LOWERS_PER_MOUNT)
		return mount_one(point, lowers, n, err, errlen);

	/* Stacked: parts of up to OVERLAY_LOWERS_PER_MOUNT layers, bottom first. */
	size_t parts = (n + OVERLAY_LOWERS_PER_MOUNT - 1) / OVERLAY_LOWERS_PER_MOUNT, made = 0;
	char (*paths)[PATH_MAX] = calloc(parts, PATH_MAX);
	const char **tops = calloc(parts, sizeof(*tops));
	enum result res = RESULT_OK;

	if (!paths || !tops) {
		snprintf(err, errlen, "out of memory");
		res = RESULT_NODE_ERROR;
	}
	for (size_t p = 0; res == RESULT_OK && p < parts; p++) {
		size_t first = p * OVERLAY_LOWERS_PER_MOUNT;
		size_t count = n - first < OVERLAY_LOWERS_PER_MOUNT ? n - first : OVERLAY_LOWERS_PER_MOUNT;

		if (snprintf(paths[p], PATH_MAX, "%s.%zu", point, p) >= PATH_MAX) {
			snprintf(err, errlen, "merged overlay %s: path too long", point);
			res = RESULT_NODE_ERROR;
			break;
		}
		if (mkdir(paths[p], 0700) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", paths[p], strerror(errno));
			res = RESULT_NODE_ERROR;
			break;
		}
		made = p + 1;
		res = mount_one(paths[p], lowers + first, count, err, errlen);
		tops[p] = paths[p];
	}
	if (res == RESULT_OK)
		res = mount_one(point, tops, parts, err, errlen);
	/* The top overlay holds its own copies of the parts. */
	for (size_t p = 0; p < made; p++) {
		if (umount2(paths[p], MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT &&
		    res == RESULT_OK) {
			snprintf(err, errlen, "cannot detach %s: %s", paths[p], strerror(errno));
			res = RESULT_NODE_ERROR;
		}
		rmdir(paths[p]);
	}
	if (res != RESULT_OK)
		umount2(point, MNT_DETACH);
	free(paths);
	free(tops);
	return res;
}

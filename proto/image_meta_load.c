/* Reading an image's /.squash/meta from where a task sees the image (see
 * image_meta.h): the user's bytes, so never through a symbolic link, never
 * from anything but a regular file, and no more than a metadata file may
 * hold. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errmsg.h"
#include "image_meta.h"
#include "read_full.h"

int squash_image_meta_load(const char *mount, struct squash_image_meta *meta, char *err,
			   size_t errlen)
{
	char *buf = NULL;
	struct stat st;
	ssize_t got;
	int root = -1, dir = -1, fd = -1, rc = -1;

	memset(meta, 0, sizeof *meta);
	root = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		squash_errf(err, errlen, "cannot open %s: %s", mount, strerror(errno));
		goto out;
	}
	dir = openat(root, ".squash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 && errno == ENOENT) {
		rc = 0;
		goto out;
	}
	if (dir < 0) {
		squash_errf(err, errlen, "%s/.squash: %s", mount,
			    errno == ELOOP || errno == ENOTDIR ? "not a directory (a symbolic link is not followed)"
							       : strerror(errno));
		goto out;
	}
	/* O_NONBLOCK: a FIFO named meta must not hang the task. */
	fd = openat(dir, "meta", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		rc = 0;
		goto out;
	}
	if (fd < 0) {
		squash_errf(err, errlen, "%s/%s: %s", mount, SQUASH_META_PATH,
			    errno == ELOOP ? "a symbolic link (not followed)" : strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		squash_errf(err, errlen, "%s/%s: not a regular file", mount, SQUASH_META_PATH);
		goto out;
	}
	if (st.st_size > SQUASH_META_MAX_BYTES) {
		squash_errf(err, errlen, "%s/%s: %lld bytes, more than the %d a metadata file may have",
			    mount, SQUASH_META_PATH, (long long)st.st_size, SQUASH_META_MAX_BYTES);
		goto out;
	}
	buf = malloc(SQUASH_META_MAX_BYTES + 1);
	if (!buf) {
		squash_errf(err, errlen, "out of memory");
		goto out;
	}
	/* One byte more than allowed: a file that grew after fstat is caught. */
	got = squash_read_full(fd, buf, SQUASH_META_MAX_BYTES + 1, 0);
	if (got < 0) {
		squash_errf(err, errlen, "%s/%s: %s", mount, SQUASH_META_PATH, strerror(errno));
		goto out;
	}
	char why[512];
	if (squash_image_meta_parse(buf, (size_t)got, meta, why, sizeof why) == 0)
		rc = 1;
	else
		squash_errf(err, errlen, "%s/%s: %s", mount, SQUASH_META_PATH, why);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	if (dir >= 0)
		close(dir);
	if (root >= 0)
		close(root);
	return rc;
}

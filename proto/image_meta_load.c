/* Reading an image's metadata from where a task sees the image (see
 * image_meta.h): its own /.squash/meta, else a uenv image's
 * /meta/env.json. The user's bytes, so never through a symbolic link,
 * never from anything but a regular file, and no more than a metadata
 * file may hold. */
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

/* The file DIR/NAME below root (path: "DIR/NAME", for messages), of at
 * most max bytes, malloc'd into *buf. 1, 0 when DIR or NAME does not
 * exist, or -1 with err. */
static int read_below(int root, const char *mount, const char *path, const char *dir_name,
		      const char *name, size_t max, char **buf, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	ssize_t got;
	int dir, fd = -1, rc = -1;

	*buf = NULL;
	dir = openat(root, dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 && errno == ENOENT)
		return 0;
	if (dir < 0) {
		squash_errf(err, errlen, "%s/%s: %s", mount, dir_name,
			    errno == ELOOP || errno == ENOTDIR ? "not a directory (a symbolic link is not followed)"
							       : strerror(errno));
		return -1;
	}
	/* O_NONBLOCK: a FIFO there must not hang the task. */
	fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		rc = 0;
		goto out;
	}
	if (fd < 0) {
		squash_errf(err, errlen, "%s/%s: %s", mount, path,
			    errno == ELOOP ? "a symbolic link (not followed)" : strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		squash_errf(err, errlen, "%s/%s: not a regular file", mount, path);
		goto out;
	}
	if ((unsigned long long)st.st_size > max) {
		squash_errf(err, errlen, "%s/%s: %lld bytes, more than the %zu a metadata file may have",
			    mount, path, (long long)st.st_size, max);
		goto out;
	}
	*buf = malloc(max + 1);
	if (!*buf) {
		squash_errf(err, errlen, "out of memory");
		goto out;
	}
	/* One byte more than allowed: a file that grew after fstat is caught
	 * (and then refused by the parser's own bound). */
	got = squash_read_full(fd, *buf, max + 1, 0);
	if (got < 0) {
		squash_errf(err, errlen, "%s/%s: %s", mount, path, strerror(errno));
		free(*buf);
		*buf = NULL;
		goto out;
	}
	*len = (size_t)got;
	rc = 1;
out:
	if (fd >= 0)
		close(fd);
	close(dir);
	return rc;
}

int squash_image_meta_load(const char *mount, struct squash_image_meta *meta, char *err,
			   size_t errlen)
{
	char *buf = NULL, why[512];
	size_t len = 0;
	int root, rc;

	memset(meta, 0, sizeof *meta);
	root = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		squash_errf(err, errlen, "cannot open %s: %s", mount, strerror(errno));
		return -1;
	}
	rc = read_below(root, mount, SQUASH_META_PATH, ".squash", "meta", SQUASH_META_MAX_BYTES, &buf, &len,
			err, errlen);
	if (rc > 0 && squash_image_meta_parse(buf, len, meta, why, sizeof why) != 0) {
		squash_errf(err, errlen, "%s/%s: %s", mount, SQUASH_META_PATH, why);
		rc = -1;
	} else if (rc == 0) {
		/* No metadata of its own: a uenv image's, if it is one. A data
		 * image may hold anything at meta/env.json (a link, a FIFO, a
		 * file of some other tool): never a reason to fail its jobs. */
		rc = read_below(root, mount, SQUASH_UENV_META_PATH, "meta", "env.json",
				SQUASH_UENV_META_MAX_BYTES, &buf, &len, why, sizeof why);
		if (rc < 0)
			rc = 0;
		if (rc > 0)
			rc = squash_image_meta_from_uenv(buf, len, meta, why, sizeof why);
		if (rc < 0 && len)
			squash_errf(err, errlen, "%s/%s: %s", mount, SQUASH_UENV_META_PATH, why);
	}
	free(buf);
	close(root);
	return rc;
}

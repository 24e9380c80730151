#include "config.h"

#include "reader/image_path.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "reader/image_format.h"

bool image_path_valid(const char *path)
{
	const char *c = path;

	if (!*path || *path == '/')
		return false;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t n = slash ? (size_t)(slash - c) : strlen(c);

		if (n == 0 || n > NAME_MAX_LEN || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n + (slash ? 1 : 0);
		if (slash && !*c)
			return false;
	}
	return true;
}

int image_path_resolve(struct image *img, const char *path, struct inode *in)
{
	char name[NAME_MAX_LEN + 1];
	const char *c = path;
	uint64_t id;
	int r;

	if (!image_path_valid(path))
		return -EINVAL;
	if ((r = inode_get(img, image_root(img), in)) < 0)
		return r;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t n = slash ? (size_t)(slash - c) : strlen(c);

		if (!S_ISDIR(in->mode))
			return -ENOTDIR;
		memcpy(name, c, n);
		name[n] = '\0';
		if ((r = dir_lookup(img, in, name, &id)) < 0 || (r = inode_get(img, id, in)) < 0)
			return r;
		c += n + (slash ? 1 : 0);
	}
	return 0;
}

int image_file_write(struct image *img, const struct inode *in, FILE *out)
{
	struct read_reply r;
	uint64_t done = 0;

	if (!S_ISREG(in->mode))
		return S_ISDIR(in->mode) ? -EISDIR : -EINVAL;
	while (done < in->size) {
		size_t want = in->size - done > (1u << 20) ? (1u << 20) : (size_t)(in->size - done);
		int rc = file_read(img, in, done, want, &r);

		if (rc < 0)
			return rc;
		if (r.bytes == 0) {
			read_reply_done(img, &r);
			return -EIO;
		}
		for (int i = 0; i < r.n; i++)
			if (fwrite(r.iov[i].iov_base, 1, r.iov[i].iov_len, out) != r.iov[i].iov_len)
				rc = -EIO;
		done += r.bytes;
		read_reply_done(img, &r);
		if (rc < 0)
			return rc;
	}
	return fflush(out) == 0 ? 0 : -EIO;
}

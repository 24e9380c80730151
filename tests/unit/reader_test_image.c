#include "config.h"

#include "reader_test_image.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "reader/image_format.h"

struct image *reader_test_open(const char *dir)
{
	char path[PATH_MAX], err[256];
	struct image *im = NULL;
	int fd;

	snprintf(path, sizeof(path), "%s/img.sqfs", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		return NULL;
	}
	if (image_open(fd, 0, 0, &im, err, sizeof(err)) < 0) {
		fprintf(stderr, "image_open %s: %s\n", path, err);
		close(fd);
		return NULL;
	}
	return im;
}

void reader_test_close(struct image *im)
{
	int fd = im->fd;

	image_close(im);
	close(fd);
}

int reader_test_lookup(struct image *im, const char *name, struct inode *in)
{
	uint64_t id;
	int r;

	if ((r = inode_get(im, image_root(im), in)) < 0 || (r = dir_lookup(im, in, name, &id)) < 0)
		return r;
	return inode_get(im, id, in);
}

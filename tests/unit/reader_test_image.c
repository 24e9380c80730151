#include "config.h"

#include "reader_test_image.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
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

bool reader_test_reads_filled(struct image *im, const char *name, size_t bytes, int fill)
{
	struct inode in;
	struct read_reply r;
	size_t at = 0;
	bool same = true;

	if (reader_test_lookup(im, name, &in) < 0 || file_read(im, &in, 0, bytes, &r) < 0)
		return false;
	for (int i = 0; i < r.n; i++) {
		const unsigned char *p = r.iov[i].iov_base;

		for (size_t k = 0; k < r.iov[i].iov_len; k++)
			same &= p[k] == fill;
		at += r.iov[i].iov_len;
	}
	read_reply_done(im, &r);
	return same && at == bytes;
}

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool reader_test_have_mksquashfs(void)
{
	return sh("command -v mksquashfs >/dev/null") == 0;
}

int reader_test_make(char *dir, size_t len, const char *name, const char *fmt, ...)
{
	char script[1024], cmd[1200];
	va_list ap;

	if ((size_t)snprintf(dir, len, "%s.XXXXXX", name) >= len || !mkdtemp(dir))
		return -1;
	va_start(ap, fmt);
	int n = vsnprintf(script, sizeof(script), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(script))
		return -1;
	snprintf(cmd, sizeof(cmd), "set -e; cd '%s'; %s", dir, script);
	return sh(cmd) == 0 ? 0 : -1;
}

void reader_test_remove(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)sh(cmd);
}

int reader_test_threads(unsigned n, void *(*fn)(void *), void *args, size_t size)
{
	pthread_t *th = calloc(n ? n : 1, sizeof(*th));
	unsigned started = 0;

	if (!th)
		return -1;
	while (started < n && pthread_create(&th[started], NULL, fn, (char *)args + started * size) == 0)
		started++;
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	return started == n ? 0 : -1;
}

/* The files of learned start profiles (start_profile.h): their key, and
 * reading and writing one in the user's cache directory. Run as the user,
 * in the learning thread only (start_profile_learn.c): the directory may be
 * on a slow or full file system, or hung, and no FUSE request waits here.
 * A file's bytes are the user's (anyone who can write the directory made
 * them): only a bounded regular file of the user's is read, and what it
 * says is parsed as an embedded profile is (start_profile_parse). */
#include "config.h"

#include "reader/start_profile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "read_full.h"

#define SUPERBLOCK_BYTES 96
/* A write's temporary file: WRITE_TMP_LEAD KEY.PID.RANDOM WRITE_TMP_TAIL,
 * hidden, and known to the trim by its shape. */
#define WRITE_TMP_LEAD '.'
#define WRITE_TMP_TAIL ".tmp"

int start_profile_cache_key(int fd, char key[17])
{
	unsigned char sb[SUPERBLOCK_BYTES], size[8];
	uint64_t h = 14695981039346656037ull;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (squash_read_full(fd, sb, sizeof(sb), 0) != (ssize_t)sizeof(sb))
		return -EIO;
	for (int i = 0; i < 8; i++)
		size[i] = (unsigned char)((uint64_t)st.st_size >> (8 * i));
	/* A repacked image has another superblock (its tables move) or size:
	 * another key, so a stale profile is never used for it. */
	for (size_t i = 0; i < sizeof(sb); i++)
		h = (h ^ sb[i]) * 1099511628211ull;
	for (size_t i = 0; i < sizeof(size); i++)
		h = (h ^ size[i]) * 1099511628211ull;
	snprintf(key, 17, "%016llx", (unsigned long long)h);
	return 0;
}

static int path_of(char *out, size_t outlen, const char *dir, const char *name)
{
	int n = snprintf(out, outlen, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

char *start_profile_cache_read(const char *dir, const char *key, size_t *len, const char **why)
{
	char path[PATH_MAX], *buf = NULL;
	struct stat st;
	ssize_t got;
	int fd;

	*why = "its path is too long";
	if (path_of(path, sizeof(path), dir, key) < 0)
		return NULL;
	/* Not a link (whoever made it), never waiting on a FIFO. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		*why = errno == ENOENT ? NULL : errno == ELOOP ? "a symbolic link" : strerror(errno);
		return NULL;
	}
	if (fstat(fd, &st) < 0)
		*why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		*why = "not a regular file";
	else if (st.st_uid != getuid())
		*why = "not the user's";
	else if (st.st_size > (off_t)START_PROFILE_MAX_BYTES)
		*why = "larger than a profile may be";
	else if (!(buf = malloc(START_PROFILE_MAX_BYTES + 1)))
		*why = "out of memory";
	if (!buf) {
		close(fd);
		return NULL;
	}
	/* One byte more than allowed: a file that grew since is refused too. */
	got = squash_read_full(fd, buf, START_PROFILE_MAX_BYTES + 1, 0);
	size_t hl = strlen(START_PROFILE_HEADER);

	if (got < 0 || got > (ssize_t)START_PROFILE_MAX_BYTES) {
		*why = got < 0 ? strerror(errno) : "larger than a profile may be";
	} else if ((size_t)got <= hl || memcmp(buf, START_PROFILE_HEADER, hl) != 0 || buf[hl] != '\n') {
		*why = "not a start profile";
	} else {
		/* A use: its mtime says when, for the pruning. Owned by the
		 * user (checked), so allowed; a failure costs the order only. */
		(void)futimens(fd, NULL);
		close(fd);
		*len = (size_t)got;
		*why = NULL;
		return buf;
	}
	close(fd);
	free(buf);
	return NULL;
}

/* mkdir -p, the directories made 0700: the profiles list what the user's
 * jobs read. Those there already are left as they are. */
static int make_dirs(const char *dir)
{
	char p[PATH_MAX];
	struct stat st;

	if (strlen(dir) >= sizeof(p))
		return -ENAMETOOLONG;
	strcpy(p, dir);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST && (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)))
			return -errno;
		if (!c)
			return 0;
		*s = c;
	}
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t k = write(fd, buf, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		buf += k;
		len -= (size_t)k;
	}
	return 0;
}

int start_profile_cache_write(const char *dir, const char *key, const char *buf, size_t len,
			      const char **what)
{
	char path[PATH_MAX], tmp[PATH_MAX], name[64];
	int fd = -1, r;

	*what = "cannot make the directory";
	if ((r = make_dirs(dir)) < 0)
		return r;
	*what = "cannot name the file";
	if ((r = path_of(path, sizeof(path), dir, key)) < 0)
		return r;
	/* A name of this process's own: other nodes may learn the same image
	 * into the same directory at once (the last rename wins). */
	*what = "cannot create a temporary file";
	for (int tries = 0; fd < 0 && tries < 8; tries++) {
		unsigned rnd = 0;

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
			rnd = (unsigned)tries;
		snprintf(name, sizeof(name), "%c%s.%ld.%08x%s", WRITE_TMP_LEAD, key, (long)getpid(), rnd,
			 WRITE_TMP_TAIL);
		if ((r = path_of(tmp, sizeof(tmp), dir, name)) < 0)
			return r;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	*what = "cannot write";
	r = write_all(fd, buf, len);
	if (close(fd) < 0 && r == 0)
		r = -errno; /* NFS and quotas may say so only here */
	if (r == 0) {
		*what = "cannot rename the temporary file";
		if (rename(tmp, path) < 0)
			r = -errno;
	}
	if (r < 0)
		unlink(tmp);
	return r;
}

/* A profile's name: 16 lowercase hexadecimal digits (start_profile_cache_key). */
static bool is_key(const char *name)
{
	size_t n = 0;

	for (; name[n]; n++)
		if (n == 16 || !((name[n] >= '0' && name[n] <= '9') || (name[n] >= 'a' && name[n] <= 'f')))
			return false;
	return n == 16;
}

/* A write's temporary file: ".KEY.PID.RANDOM.tmp" (start_profile_cache_write). */
static bool is_write_tmp(const char *name)
{
	size_t n = strlen(name), tail = strlen(WRITE_TMP_TAIL);
	char key[17];

	if (name[0] != WRITE_TMP_LEAD || n < 1 + 16 + tail || strcmp(name + n - tail, WRITE_TMP_TAIL) != 0)
		return false;
	memcpy(key, name + 1, 16);
	key[16] = '\0';
	return is_key(key) && name[17] == '.';
}

struct kept {
	time_t used;
	char name[17];
};

static int newest_first(const void *a, const void *b)
{
	time_t x = ((const struct kept *)a)->used, y = ((const struct kept *)b)->used;

	return x < y ? 1 : x > y ? -1 : strcmp(((const struct kept *)a)->name, ((const struct kept *)b)->name);
}

int start_profile_cache_prune(const char *dir, time_t now)
{
	struct kept *kept = NULL;
	size_t n = 0, cap = 0, seen = 0;
	int dfd, removed = 0;
	struct dirent *e;
	DIR *d;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (!(d = fdopendir(dfd))) {
		int r = -errno;

		close(dfd);
		return r;
	}
	while ((e = readdir(d)) && seen++ < START_PROFILE_CACHE_SCAN) {
		bool key = is_key(e->d_name), tmp = !key && is_write_tmp(e->d_name);
		struct stat st;

		if ((!key && !tmp) || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_uid != getuid())
			continue;
		if (tmp || !S_ISREG(st.st_mode)) {
			/* A write that died; a link or other thing at a key is
			 * replaced by the next write, not removed here. */
			if (tmp && S_ISREG(st.st_mode) && now - st.st_mtime > START_PROFILE_CACHE_STALE_TMP_S &&
			    unlinkat(dfd, e->d_name, 0) == 0)
				removed++;
			continue;
		}
		if (now - st.st_mtime > START_PROFILE_CACHE_UNUSED_S) {
			removed += unlinkat(dfd, e->d_name, 0) == 0;
			continue;
		}
		if (n == cap) {
			size_t c = cap ? cap * 2 : 64;
			struct kept *k = realloc(kept, c * sizeof(*k));

			if (!k)
				break; /* prunes what it has seen */
			kept = k;
			cap = c;
		}
		kept[n].used = st.st_mtime;
		memcpy(kept[n].name, e->d_name, 17);
		n++;
	}
	if (n > START_PROFILE_CACHE_KEEP) {
		qsort(kept, n, sizeof(*kept), newest_first);
		for (size_t i = START_PROFILE_CACHE_KEEP; i < n; i++)
			removed += unlinkat(dfd, kept[i].name, 0) == 0;
	}
	free(kept);
	closedir(d);
	return removed;
}

/* Walking an image's start profile through its own mount (start_profile.h).
 *
 * Why through the mount: reading the image ahead (start_profile_prefetch.c)
 * saves the start its round trips to the image file, but each name the
 * start looks up and each file it reads is still a FUSE request on its
 * path, waited for one after another. The kernel only keeps dentries,
 * inodes and pages that a request through the mount made; the reader has
 * no way to push a dentry (a store needs the inode first). So a thread of
 * the reader asks itself, as the start will, just before: it lists the
 * directories the profile's files are in (a READDIRPLUS answer gives the
 * kernel every entry's dentry and inode) and reads the bytes the profile
 * recorded (the pages stay in the files' page cache). It runs beside the
 * start, on the other CPU, and is ahead of it because it runs no code
 * (docs/performance.md, section 29).
 *
 * Bounded: the profile's files as for the read ahead, and of them only
 * those whose recorded bytes are at most START_PROFILE_WALK_FILE_MAX; at most
 * START_PROFILE_WALK_MAX_DIRS directories listed and START_PROFILE_WALK_MAX_MS
 * of walking; START_PROFILE_MAX_RUNNING walks at once per reader. Paths
 * resolve inside the mount only (openat2 RESOLVE_IN_ROOT, RESOLVE_NO_XDEV):
 * the profile is the user's and its symlinks point anywhere. */
#include "config.h"

#include "reader/start_profile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "reader/image_format.h"

#define CHUNK (128u << 10)
#define LISTED_SLOTS (2 * START_PROFILE_WALK_MAX_DIRS) /* a power of two */

static atomic_uint running;

/* One walk: its thread's and, until image_close, the image's. The thread
 * reads the profile through the image first (the image may not close
 * meanwhile: start_profile_walk_end waits for that part), and from then
 * on only the mount: it is detached, since a request of its on a mount
 * whose session ended may never be answered (squashd keeps the
 * connection), and image_close must not wait for that. */
struct walk {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	int refs;
	bool profile_read, done;  /* under lock */
	atomic_bool stop;
	struct image *img;        /* until profile_read */
	int root;
	long long deadline_ms;
	uint64_t bytes;     /* read through the mount so far */
	unsigned dirs;      /* listed so far */
	uint64_t *listed;   /* hashes of the directories listed (0: free) */
	char *chunk;
};

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static bool over(const struct walk *w)
{
	return atomic_load(&w->stop) || w->bytes >= START_PROFILE_MAX_PREFETCH || now_ms() > w->deadline_ms;
}

/* Whether the directory (len bytes of path) is new to this walk; it then
 * counts as listed. A hash collision skips a listing: only advice. */
static bool first_time(struct walk *w, const char *path, size_t len)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)path[i]) * 1099511628211ull;
	h |= 1;
	for (size_t i = h & (LISTED_SLOTS - 1);; i = (i + 1) & (LISTED_SLOTS - 1)) {
		if (w->listed[i] == h)
			return false;
		if (w->listed[i] == 0) {
			if (w->dirs >= START_PROFILE_WALK_MAX_DIRS)
				return false;
			w->listed[i] = h;
			w->dirs++;
			return true;
		}
	}
}

/* path below the mount's root, never leaving the mount; never waiting
 * for a FIFO's other end (O_NONBLOCK: the kernel, not the server, opens
 * those). */
static int open_inside(const struct walk *w, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS };

	return (int)syscall(SYS_openat2, w->root, path[0] ? path : ".", &how, sizeof(how));
}

static void list_dir(struct walk *w, const char *path)
{
	int fd = open_inside(w, path, O_RDONLY | O_DIRECTORY);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while (readdir(d) && !over(w))
		;
	closedir(d);
}

static void read_part(struct walk *w, const char *path, uint64_t from, uint64_t to)
{
	int fd = open_inside(w, path, O_RDONLY);
	struct stat st;

	if (fd < 0)
		return;
	/* A regular file only: the image is the user's, its profile too. */
	while (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && from < to && !over(w)) {
		size_t n = to - from < CHUNK ? (size_t)(to - from) : CHUNK;
		ssize_t k = pread(fd, w->chunk, n, (off_t)from);

		if (k <= 0)
			break;
		from += (uint64_t)k;
		w->bytes += (uint64_t)k;
	}
	close(fd);
}

static int walk_line(void *ctx, const struct profile_line *l)
{
	struct walk *w = ctx;
	char dir[PATH_MAX];
	size_t plen = strlen(l->path);

	if (over(w))
		return 1;
	if (plen >= sizeof(dir))
		return 0;
	/* Its directories first, the outermost first, as a lookup goes. */
	if (first_time(w, "", 0))
		list_dir(w, "");
	for (const char *s = strchr(l->path, '/'); s && !over(w); s = strchr(s + 1, '/')) {
		size_t n = (size_t)(s - l->path);

		if (!first_time(w, l->path, n))
			continue;
		memcpy(dir, l->path, n);
		dir[n] = '\0';
		list_dir(w, dir);
	}
	/* Small files only: a start opens many, one round trip each. A
	 * large one (a shared library, mapped) is read on faults in large
	 * pieces anyway, and reading it here took the CPU from whatever else
	 * the job does first (docs/performance.md, section 29). */
	if (l->to - l->from <= START_PROFILE_WALK_FILE_MAX)
		read_part(w, l->path, l->from, l->to);
	return 0;
}

static void walk_put(struct walk *w)
{
	pthread_mutex_lock(&w->lock);
	bool last = --w->refs == 0;
	pthread_mutex_unlock(&w->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->changed);
	free(w);
}

/* Marks a step of w's and wakes who waits for it. */
static void walk_mark(struct walk *w, bool *step)
{
	pthread_mutex_lock(&w->lock);
	*step = true;
	pthread_cond_broadcast(&w->changed);
	pthread_mutex_unlock(&w->lock);
}

static void *walk_thread(void *arg)
{
	struct walk *w = arg;
	size_t len;
	char *buf = start_profile_bytes(w->img, &w->stop, &len);

	w->img = NULL;
	walk_mark(w, &w->profile_read);
	if (buf) {
		(void)start_profile_parse(buf, len, walk_line, w);
		free(buf);
	}
	close(w->root);
	free(w->listed);
	free(w->chunk);
	atomic_fetch_sub(&running, 1);
	walk_mark(w, &w->done);
	walk_put(w);
	return NULL;
}

void start_profile_walk_begin(struct image *img, int root_fd)
{
	struct walk *w = NULL;
	pthread_attr_t attr;
	pthread_t t;
	int rc = -1;

	if (root_fd < 0)
		return;
	/* Not while recording a profile: the walk would be in it. */
	if (img->record_exact || img->walk) {
		close(root_fd);
		return;
	}
	if (atomic_fetch_add(&running, 1) >= START_PROFILE_MAX_RUNNING ||
	    !(w = calloc(1, sizeof(*w))) || !(w->listed = calloc(LISTED_SLOTS, sizeof(*w->listed))) ||
	    !(w->chunk = malloc(CHUNK))) {
		if (w) {
			free(w->listed);
			free(w);
		}
		close(root_fd);
		atomic_fetch_sub(&running, 1);
		return;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->changed, NULL);
	w->refs = 2;
	w->img = img;
	w->root = root_fd;
	w->deadline_ms = now_ms() + START_PROFILE_WALK_MAX_MS;
	if (pthread_attr_init(&attr) == 0) {
		pthread_attr_setstacksize(&attr, 256u << 10);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, walk_thread, w);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		close(root_fd);
		free(w->listed);
		free(w->chunk);
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->changed);
		free(w);
		atomic_fetch_sub(&running, 1);
		return;
	}
	img->walk = w;
}

/* Waits for *step of img's walk, then lets go of it. */
static void wait_and_leave(struct image *img, bool *(*step_of)(struct walk *w))
{
	struct walk *w = img->walk;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	bool *step = step_of(w);
	while (!*step)
		pthread_cond_wait(&w->changed, &w->lock);
	pthread_mutex_unlock(&w->lock);
	img->walk = NULL;
	walk_put(w);
}

static bool *profile_read_of(struct walk *w)
{
	return &w->profile_read;
}

static bool *done_of(struct walk *w)
{
	return &w->done;
}

void start_profile_walk_end(struct image *img)
{
	if (img->walk)
		atomic_store(&img->walk->stop, true);
	wait_and_leave(img, profile_read_of);
}

void start_profile_walk_wait(struct image *img)
{
	wait_and_leave(img, done_of);
}

/* Learning a start profile per user and image (start_profile.h): most
 * images hold none (squash-pack --profile), so the reader records the
 * start of the first mount of one and uses that at the next.
 *
 * Why here, in the reader: it runs as the user, so the cache is the
 * user's own directory, written with the user's rights and quota, and
 * squashd never touches a user's file system (docs/architecture.md).
 *
 * One thread per learning image does every file operation on the cache:
 * it looks the image's file up, then (none there) waits for the learning
 * window to pass and writes what was recorded. The image's side only
 * records (a FUSE request notes what it reads) and, at image_close, finds
 * the recorded files' paths in the image, bounded in time. The thread uses
 * the image only while image_close lets it (img_enter), and image_close
 * never waits for a file operation: a hung home directory costs the
 * profile, never the mount. */
#include "config.h"

#include "reader/start_profile.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "profile_cache_path.h"
#include "reader/image_format.h"
#include "reader/image_path.h"

enum learn_state { LOOKING, FOUND, LEARNING, OFF };

struct learn {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	int refs;                 /* the image's and the thread's */
	enum learn_state state;
	bool closing;             /* image_close began: img only for img_users */
	int img_users;
	bool gen_claimed, gen_done; /* finding the paths: by one side, once */
	struct image *img;
	struct profile_recorder *rec;
	char *found;              /* FOUND: the cache's profile */
	size_t found_len;
	char *text;               /* what was learned, once gen_done */
	size_t text_len;
	int text_files;
};

static char *template;
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t threads_gone = PTHREAD_COND_INITIALIZER;
static unsigned threads;

void start_profile_learn_configure(const char *tmpl)
{
	free(template);
	template = tmpl && *tmpl ? strdup(tmpl) : NULL;
}

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits on l->changed (lock held) until at most ms from now. */
static void wait_ms(struct learn *l, long long ms)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)(ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&l->changed, &l->lock, &t);
}

/* One line per kind of trouble and process: a user's thousand jobs on a
 * read-only home would otherwise say the same a thousand times. */
static void __attribute__((format(printf, 2, 3))) say_once(atomic_bool *said, const char *fmt, ...)
{
	va_list ap;

	if (atomic_exchange(said, true))
		return;
	va_start(ap, fmt);
	fprintf(stderr, "squash-reader: start profile cache: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void learn_put(struct learn *l)
{
	pthread_mutex_lock(&l->lock);
	bool last = --l->refs == 0;
	pthread_mutex_unlock(&l->lock);
	if (!last)
		return;
	profile_recorder_free(l->rec);
	free(l->found);
	free(l->text);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->changed);
	free(l);
}

static void set_state(struct learn *l, enum learn_state s)
{
	pthread_mutex_lock(&l->lock);
	l->state = s;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
}

/* The thread's use of the image, unless image_close began. */
static bool img_enter(struct learn *l)
{
	pthread_mutex_lock(&l->lock);
	bool ok = !l->closing;

	if (ok)
		l->img_users++;
	pthread_mutex_unlock(&l->lock);
	return ok;
}

static void img_leave(struct learn *l)
{
	pthread_mutex_lock(&l->lock);
	l->img_users--;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
}

/* The recorded files' paths, as a profile; by whichever side claimed it. */
static void generate(struct learn *l)
{
	FILE *f;

	profile_recorder_stop(l->rec);
	if (profile_recorder_first_ms(l->rec) && (f = open_memstream(&l->text, &l->text_len))) {
		l->text_files = profile_recorder_write(l->rec, l->img, f,
						       now_ms() + START_PROFILE_LEARN_WRITE_MS);
		if (fclose(f) != 0 && l->text_files > 0)
			l->text_files = -EIO;
	}
	pthread_mutex_lock(&l->lock);
	l->gen_done = true;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
}

static int count_line(void *ctx, const struct profile_line *line)
{
	(void)line;
	(*(int *)ctx)++;
	return 0;
}

/* DIR: the template expanded as the reader's user; 0 or -EINVAL. */
static int cache_dir(char *dir, size_t len)
{
	struct profile_cache_user u = { .uid = (unsigned long)getuid() };
	struct passwd pw, *found = NULL;
	char buf[4096];

	if (profile_cache_needs_passwd(template) &&
	    getpwuid_r(getuid(), &pw, buf, sizeof(buf), &found) == 0 && found) {
		u.home = pw.pw_dir;
		u.name = pw.pw_name;
	}
	return profile_cache_expand(template, &u, dir, len);
}

/* Waits for the learning window or the image's close; then the text. */
static void learn_window(struct learn *l)
{
	pthread_mutex_lock(&l->lock);
	for (;;) {
		long long first = profile_recorder_first_ms(l->rec), left;

		if (l->closing)
			break;
		left = first ? first + START_PROFILE_LEARN_MS - now_ms() : 1000;
		if (first && left <= 0)
			break;
		wait_ms(l, left < 1000 ? left : 1000);
	}
	bool mine = !l->gen_claimed && !l->closing;

	if (mine) {
		l->gen_claimed = true;
		l->img_users++;
	}
	/* image_close claimed it: wait for its text; neither: too late. */
	while (!mine && l->gen_claimed && !l->gen_done)
		pthread_cond_wait(&l->changed, &l->lock);
	pthread_mutex_unlock(&l->lock);
	if (mine) {
		generate(l);
		img_leave(l);
	}
}

static void *learn_thread(void *arg)
{
	static atomic_bool said_template, said_read, said_write, said_paths;
	struct learn *l = arg;
	char dir[PATH_MAX], key[17], path[PATH_MAX + 32];
	const char *why = NULL;
	bool embedded = true;
	struct inode in;
	size_t len;
	char *buf;
	int r;

	if (img_enter(l)) {
		/* An image with a profile of its own learns nothing. */
		embedded = image_path_resolve(l->img, START_PROFILE_PATH, &in) == 0 ||
			   start_profile_cache_key(l->img->fd, key) < 0;
		img_leave(l);
	}
	if (embedded)
		goto off;
	if (cache_dir(dir, sizeof(dir)) < 0) {
		say_once(&said_template, "cannot expand %s%s; learning nothing", template,
			 profile_cache_needs_passwd(template) ? " (no home or name for the user?)" : "");
		goto off;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, key);
	if ((buf = start_profile_cache_read(dir, key, &len, &why))) {
		int files = 0;
		char *copy = malloc(len);

		if (copy) {
			memcpy(copy, buf, len);
			(void)start_profile_parse(copy, len, count_line, &files);
			free(copy);
		}
		/* Before anyone reads through the mount for it (the walk). */
		profile_recorder_stop(l->rec);
		pthread_mutex_lock(&l->lock);
		l->found = buf;
		l->found_len = len;
		l->state = FOUND;
		pthread_cond_broadcast(&l->changed);
		pthread_mutex_unlock(&l->lock);
		fprintf(stderr, "squash-reader: start profile learned from %s: %d files\n", path, files);
		goto out;
	}
	if (why)
		say_once(&said_read, "ignoring %s: %s", path, why);
	pthread_mutex_lock(&l->lock);
	l->state = l->closing ? OFF : LEARNING;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
	learn_window(l);
	if (l->gen_done && l->text_files == -ETIMEDOUT)
		say_once(&said_paths, "%s: the files read were not found in the image in time", path);
	if (l->gen_done && l->text_files > 0) {
		const char *what;

		if ((r = start_profile_cache_write(dir, key, l->text, l->text_len, &what)) < 0)
			say_once(&said_write, "%s: %s: %s; learning nothing", path, what, strerror(-r));
		else {
			fprintf(stderr, "squash-reader: start profile learned into %s: %d files\n", path,
				l->text_files);
			/* A write is how the directory grows: bounded here. */
			if ((r = start_profile_cache_prune(dir, time(NULL))) > 0)
				fprintf(stderr, "squash-reader: start profile cache %s: %d old files removed\n",
					dir, r);
		}
	}
	goto out;
off:
	profile_recorder_stop(l->rec);
	set_state(l, OFF);
out:
	learn_put(l);
	pthread_mutex_lock(&threads_lock);
	threads--;
	pthread_cond_broadcast(&threads_gone);
	pthread_mutex_unlock(&threads_lock);
	return NULL;
}

void start_profile_learn_begin(struct image *img)
{
	struct learn *l;
	pthread_attr_t attr;
	pthread_t t;
	int rc = -1;

	if (!template || img->recorder || !(l = calloc(1, sizeof(*l))))
		return;
	if (!(l->rec = profile_recorder_new())) {
		free(l);
		return;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->changed, NULL);
	l->refs = 2;
	l->img = img;
	pthread_mutex_lock(&threads_lock);
	threads++;
	pthread_mutex_unlock(&threads_lock);
	if (pthread_attr_init(&attr) == 0) {
		/* Room for getpwuid_r's NSS modules (sssd, LDAP) and the paths. */
		pthread_attr_setstacksize(&attr, 512u << 10);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, learn_thread, l);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		pthread_mutex_lock(&threads_lock);
		threads--;
		pthread_mutex_unlock(&threads_lock);
		l->refs = 1;
		learn_put(l);
		return;
	}
	/* From the first request on: the start's first reads are the
	 * profile's first lines. Stopped if a profile turns up. */
	img->learn = l;
	img->recorder = l->rec;
}

void start_profile_learn_end(struct image *img)
{
	struct learn *l = img->learn;

	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->closing = true;
	pthread_cond_broadcast(&l->changed);
	/* Still looking (a slow home): the recording is taken now, while the
	 * image is there, in case the thread finds no profile. */
	bool mine = (l->state == LOOKING || l->state == LEARNING) && !l->gen_claimed;

	if (mine)
		l->gen_claimed = true;
	pthread_mutex_unlock(&l->lock);
	if (mine)
		generate(l);
	/* The thread's uses of the image are bounded (a lookup, or finding
	 * the paths by START_PROFILE_LEARN_WRITE_MS); its file operations
	 * are not waited for. */
	pthread_mutex_lock(&l->lock);
	while (l->img_users > 0)
		pthread_cond_wait(&l->changed, &l->lock);
	pthread_mutex_unlock(&l->lock);
	img->recorder = NULL;
	img->learn = NULL;
	learn_put(l);
}

void start_profile_learn_drain(int ms)
{
	long long until = now_ms() + ms;

	pthread_mutex_lock(&threads_lock);
	while (threads > 0 && now_ms() < until) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 50 * 1000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&threads_gone, &threads_lock, &t);
	}
	pthread_mutex_unlock(&threads_lock);
}

/* ---- the profile's bytes, from either place */

char *start_profile_bytes(struct image *img, const atomic_bool *stop, size_t *len)
{
	char *buf = start_profile_read(img, len);
	struct learn *l = img->learn;
	long long until = now_ms() + START_PROFILE_LOOKUP_WAIT_MS;

	if (buf || !l)
		return buf;
	pthread_mutex_lock(&l->lock);
	while (l->state == LOOKING && !atomic_load(stop) && now_ms() < until)
		wait_ms(l, 50);
	if (l->state == FOUND && (buf = malloc(l->found_len))) {
		memcpy(buf, l->found, l->found_len);
		*len = l->found_len;
	}
	pthread_mutex_unlock(&l->lock);
	return buf;
}

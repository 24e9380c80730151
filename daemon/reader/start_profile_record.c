/* Recording a start profile (start_profile.h): the files a program read
 * through this reader and which of their bytes, then their paths. */
#include "config.h"

#include "reader/start_profile.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "reader/image.h"

/* Open addressing on the inode reference; twice the most files it keeps. */
#define SLOTS (2 * START_PROFILE_MAX_FILES)
#define MAX_DEPTH 128

struct recorded {
	uint64_t key; /* the inode reference + 1; 0: free */
	uint64_t from, to;
	uint32_t order;
	bool written;
};

struct profile_recorder {
	pthread_mutex_t lock;
	struct recorded *slots;
	uint32_t files;
	atomic_bool stopped;
	_Atomic long long first_ms; /* CLOCK_MONOTONIC of the first file noted; 0: none */
};

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void profile_recorder_stop(struct profile_recorder *rec)
{
	atomic_store(&rec->stopped, true);
}

long long profile_recorder_first_ms(struct profile_recorder *rec)
{
	return atomic_load(&rec->first_ms);
}

struct profile_recorder *profile_recorder_new(void)
{
	struct profile_recorder *rec = calloc(1, sizeof(*rec));

	if (!rec)
		return NULL;
	if (!(rec->slots = calloc(SLOTS, sizeof(*rec->slots)))) {
		free(rec);
		return NULL;
	}
	pthread_mutex_init(&rec->lock, NULL);
	return rec;
}

void profile_recorder_free(struct profile_recorder *rec)
{
	if (!rec)
		return;
	pthread_mutex_destroy(&rec->lock);
	free(rec->slots);
	free(rec);
}

/* The slot of key, or the free one where it would go. */
static struct recorded *slot_of(struct profile_recorder *rec, uint64_t key)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;

	for (uint32_t i = 0; i < SLOTS; i++) {
		struct recorded *s = &rec->slots[(h + i) % SLOTS];

		if (s->key == key || s->key == 0)
			return s;
	}
	return NULL;
}

void profile_recorder_note(struct profile_recorder *rec, uint64_t id, uint64_t from, uint64_t to)
{
	struct recorded *s;

	if (from >= to || id == UINT64_MAX || atomic_load_explicit(&rec->stopped, memory_order_relaxed))
		return;
	pthread_mutex_lock(&rec->lock);
	s = slot_of(rec, id + 1);
	if (s && s->key == id + 1) {
		if (from < s->from)
			s->from = from;
		if (to > s->to)
			s->to = to;
	} else if (s && rec->files < START_PROFILE_MAX_FILES) {
		if (rec->files == 0)
			atomic_store(&rec->first_ms, now_ms());
		*s = (struct recorded){ id + 1, from, to, rec->files++, false };
	}
	pthread_mutex_unlock(&rec->lock);
}

/* ---- paths: a walk of the tree, depth first */

struct walk_level {
	struct inode dir;
	struct dir_iter it;
	size_t pathlen; /* path's length up to this directory's '/' */
};

struct found {
	char *path;
	uint64_t from, to;
	uint32_t order;
};

static int by_order(const void *a, const void *b)
{
	const struct found *x = a, *y = b;

	return x->order < y->order ? -1 : x->order > y->order;
}

/* Collects the recorded files' paths into *out (in no order);
 * -ETIMEDOUT past deadline_ms (0: none). */
static int walk(struct profile_recorder *rec, struct image *img, struct found *out, uint32_t *n,
		long long deadline_ms)
{
	struct walk_level *lv = calloc(MAX_DEPTH, sizeof(*lv));
	char path[4096];
	struct statvfs st;
	uint64_t visits = 0, max_visits;
	int depth = 0, r;

	if (!lv)
		return -ENOMEM;
	if ((r = inode_get(img, image_root(img), &lv[0].dir)) < 0 ||
	    (r = dir_open(img, &lv[0].dir, 0, &lv[0].it)) < 0)
		goto out;
	lv[0].pathlen = 0;
	/* A tree has each inode's entries once (hard links aside): a damaged
	 * image's directory that holds its own ancestor stops here. */
	image_statfs(img, &st);
	max_visits = 2 * (uint64_t)st.f_files + 1024;
	while (depth >= 0 && *n < rec->files && visits++ < max_visits) {
		struct dir_entry e;
		struct walk_level *l = &lv[depth];

		if (deadline_ms && (visits & 255) == 0 && now_ms() > deadline_ms) {
			r = -ETIMEDOUT;
			goto out;
		}
		if ((r = dir_next(img, &l->it, &e)) < 0)
			goto out;
		if (r == 0) {
			depth--;
			continue;
		}
		if (l->pathlen + e.namelen + 2 > sizeof(path) || memchr(e.name, '\n', e.namelen))
			continue;
		memcpy(path + l->pathlen, e.name, e.namelen + 1);
		if (S_ISDIR(dir_entry_mode(e.type))) {
			if (depth + 1 >= MAX_DEPTH)
				continue;
			struct walk_level *c = &lv[depth + 1];

			if ((r = inode_get(img, e.id, &c->dir)) < 0 || (r = dir_open(img, &c->dir, 0, &c->it)) < 0)
				goto out;
			path[l->pathlen + e.namelen] = '/';
			c->pathlen = l->pathlen + e.namelen + 1;
			depth++;
			continue;
		}
		struct recorded *s = slot_of(rec, e.id + 1);

		if (!s || s->key != e.id + 1 || s->written)
			continue;
		s->written = true; /* a hard link's other names: once is enough */
		if (!(out[*n].path = strdup(path))) {
			r = -ENOMEM;
			goto out;
		}
		out[*n].from = s->from;
		out[*n].to = s->to;
		out[*n].order = s->order;
		(*n)++;
	}
	r = 0;
out:
	free(lv);
	return r;
}

int profile_recorder_write(struct profile_recorder *rec, struct image *img, FILE *out,
			   long long deadline_ms)
{
	struct found *f;
	uint32_t n = 0;
	int r;

	pthread_mutex_lock(&rec->lock);
	for (uint32_t i = 0; i < SLOTS; i++)
		rec->slots[i].written = false;
	f = calloc(rec->files ? rec->files : 1, sizeof(*f));
	r = f ? walk(rec, img, f, &n, deadline_ms) : -ENOMEM;
	pthread_mutex_unlock(&rec->lock);
	if (r == 0) {
		qsort(f, n, sizeof(*f), by_order);
		fprintf(out, "%s\n", START_PROFILE_HEADER);
		for (uint32_t i = 0; i < n; i++)
			fprintf(out, "%llu %llu %s\n", (unsigned long long)f[i].from,
				(unsigned long long)f[i].to, f[i].path);
		r = fflush(out) == 0 && !ferror(out) ? (int)n : -EIO;
	}
	for (uint32_t i = 0; f && i < n; i++)
		free(f[i].path);
	free(f);
	return r;
}

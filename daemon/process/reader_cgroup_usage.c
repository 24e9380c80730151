#include "config.h"

#include "process/reader_cgroup_usage.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "process/reader_cgroup.h"
#include "process/reader_scope.h"

/* The uid whose cgroup directory of base is name, or -1. */
static long long user_of_entry(const struct reader_cgroup_where *w, const char *name)
{
	char want[128];
	unsigned uid;
	int end = 0;

	if (!w->under_systemd)
		return sscanf(name, "uid-%u%n", &uid, &end) == 1 && !name[end] ? (long long)uid : -1;
	/* "...u<uid>.slice", checked against the name squashd gives it. */
	const char *dot = strrchr(name, '.'), *d = dot;
	while (d && d > name && d[-1] >= '0' && d[-1] <= '9')
		d--;
	if (!d || d == dot || d == name || d[-1] != 'u' || sscanf(d, "%u", &uid) != 1 ||
	    reader_scope_slice_name(w->instance, uid, want, sizeof(want)) < 0 || strcmp(want, name))
		return -1;
	return uid;
}

/* The number after "KEY " on a line of dir's file (key NULL: the file's
 * first number), or -1. */
static long long cgroup_value(const char *dir, const char *file, const char *key)
{
	char path[PATH_MAX + 32], line[128];
	size_t keylen = key ? strlen(key) : 0;
	long long found = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!(f = fopen(path, "re")))
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		const char *num = line;
		char *end;

		if (key && (strncmp(line, key, keylen) || line[keylen] != ' '))
			continue;
		num += key ? keylen + 1 : 0;
		unsigned long long v = strtoull(num, &end, 10);
		if (end != num && v <= LLONG_MAX)
			found = (long long)v;
	}
	fclose(f);
	return found;
}

/* cgroup v1 counts an OOM kill only in the killed process's cgroup, a
 * reader's own, which goes with the reader: what those of ended readers
 * counted, per user (a user past the table's size counts from then on
 * only what runs). */
#define ENDED_USERS_MAX 4096
static struct {
	uid_t uid;
	unsigned long long kills;
} ended[ENDED_USERS_MAX];
static size_t ended_users;
static pthread_mutex_t ended_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned long long ended_kills(uid_t uid, unsigned long long add)
{
	unsigned long long kills = 0;
	size_t i;

	pthread_mutex_lock(&ended_lock);
	for (i = 0; i < ended_users && ended[i].uid != uid; i++)
		;
	if (i == ended_users && add && ended_users < ENDED_USERS_MAX)
		ended[ended_users++].uid = uid;
	if (i < ended_users)
		kills = ended[i].kills += add;
	pthread_mutex_unlock(&ended_lock);
	return kills;
}

static long long v1_oom_kills(const char *dir)
{
	return cgroup_value(dir, "memory.oom_control", "oom_kill");
}

/* v1: the user's cgroup's own, its readers' and its ended readers'. */
static long long v1_user_oom_kills(const char *user_dir, uid_t uid)
{
	long long own = v1_oom_kills(user_dir), v;
	struct dirent *e;
	DIR *d;

	if (own < 0 || !(d = opendir(user_dir)))
		return -1;
	while ((e = readdir(d))) {
		char dir[PATH_MAX];

		if (!strncmp(e->d_name, "reader-", 7) &&
		    (size_t)snprintf(dir, sizeof(dir), "%s/%s", user_dir, e->d_name) < sizeof(dir) &&
		    (v = v1_oom_kills(dir)) > 0)
			own += v;
	}
	closedir(d);
	return own + (long long)ended_kills(uid, 0);
}

void reader_cgroup_usage_reader_ending(uid_t uid, pid_t pid)
{
	struct reader_cgroup_where w;
	char dir[PATH_MAX];
	long long v;

	reader_cgroup_where(&w);
	if (!w.unified && w.memory_base[0] &&
	    (size_t)snprintf(dir, sizeof(dir), "%s/uid-%u/reader-%d", w.memory_base, (unsigned)uid, (int)pid) <
		    sizeof(dir) &&
	    (v = v1_oom_kills(dir)) > 0)
		(void)ended_kills(uid, (unsigned long long)v);
}

static long long user_value(const struct reader_cgroup_where *w, const char *dir, uid_t uid,
			    enum reader_usage_kind kind)
{
	long long v;

	switch (kind) {
	case READER_USAGE_CPU_MS:
		if (!w->unified)
			return (v = cgroup_value(dir, "cpuacct.usage", NULL)) < 0 ? -1 : v / 1000000;
		return (v = cgroup_value(dir, "cpu.stat", "usage_usec")) < 0 ? -1 : v / 1000;
	case READER_USAGE_MEMORY_BYTES:
		return cgroup_value(dir, w->unified ? "memory.current" : "memory.usage_in_bytes", NULL);
	case READER_USAGE_OOM_KILLS:
		/* v2 counts up the tree: the user's cgroup has its readers'. */
		return w->unified ? cgroup_value(dir, "memory.events", "oom_kill") : v1_user_oom_kills(dir, uid);
	}
	return -1;
}

static const char *base_of(const struct reader_cgroup_where *w, enum reader_usage_kind kind)
{
	return kind == READER_USAGE_CPU_MS ? w->cpu_base : w->memory_base;
}

void reader_cgroup_usage(enum reader_usage_kind kind, reader_usage_fn fn, void *arg)
{
	struct reader_cgroup_where w;
	struct dirent *e;
	const char *base;
	DIR *d;

	reader_cgroup_where(&w);
	base = base_of(&w, kind);
	if (!base[0] || !(d = opendir(base)))
		return;
	while ((e = readdir(d))) {
		char dir[PATH_MAX];
		long long uid = user_of_entry(&w, e->d_name), v;

		if (uid < 0 || (size_t)snprintf(dir, sizeof(dir), "%s/%s", base, e->d_name) >= sizeof(dir))
			continue;
		if ((v = user_value(&w, dir, (uid_t)uid, kind)) >= 0)
			fn(arg, (uid_t)uid, kind, (unsigned long long)v);
	}
	closedir(d);
}

long long reader_cgroup_oom_kills(uid_t uid)
{
	struct reader_cgroup_where w;
	char dir[PATH_MAX], name[128];

	reader_cgroup_where(&w);
	if (!w.memory_base[0])
		return -1;
	if (w.under_systemd) {
		if (reader_scope_slice_name(w.instance, uid, name, sizeof(name)) < 0)
			return -1;
	} else {
		snprintf(name, sizeof(name), "uid-%u", (unsigned)uid);
	}
	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", w.memory_base, name) >= sizeof(dir))
		return -1;
	return user_value(&w, dir, uid, READER_USAGE_OOM_KILLS);
}

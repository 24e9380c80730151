#include "config.h"
#include "mount/mount_users.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mountinfo.h"
#include "util/proc_uids.h"

/* The number after tag ("shared:" or "master:") among the optional
 * fields of a parsed mountinfo line, or 0. */
static unsigned long optional_field(const char *optional, const char *tag)
{
	size_t taglen = strlen(tag);

	for (const char *p = optional; *p;) {
		size_t n = strcspn(p, " ");

		if (n > taglen && !strncmp(p, tag, taglen))
			return strtoul(p + taglen, NULL, 10);
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

void mount_users_identity(const char *mountinfo, const char *path, struct mount_identity *id)
{
	id->dev[0] = '\0';
	id->peer_group = 0;
	for (const char *line = mountinfo; line && *line; line = squash_mountinfo_next_line(line)) {
		struct squash_mount m;
		char *copy;
		bool match = squash_mountinfo_parse_copy(line, &copy, &m) == 0 && !strcmp(m.mount_point, path);

		if (match) {
			snprintf(id->dev, sizeof(id->dev), "%u:%u", m.major, m.minor);
			id->peer_group = optional_field(m.optional, "shared:");
		}
		free(copy);
		if (match)
			return;
	}
}

/* Whether a mountinfo line of another namespace is a copy that mount
 * propagation keeps in step with ours. */
static bool propagated_copy(const struct squash_mount *m, const struct mount_identity *id)
{
	return id->peer_group && (optional_field(m->optional, "shared:") == id->peer_group ||
				  optional_field(m->optional, "master:") == id->peer_group);
}

char *mount_users_read_file(const char *path, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = fd >= 0 ? malloc(max + 1) : NULL;
	size_t got = 0;
	ssize_t k;

	if (!buf) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (got < max && (k = read(fd, buf + got, max - got)) > 0)
		got += (size_t)k;
	close(fd);
	buf[got] = '\0';
	return buf;
}

/* Bytes of mountinfo read for one uid in a round. */
struct uid_spent {
	uid_t uid;
	size_t bytes;
};

/* Whether q is still open for a process of uid (root's processes: every
 * query). */
static bool asks_about(const struct mount_use_query *q, uid_t uid)
{
	return q->user == 0 && (uid == 0 || q->uid == uid);
}

/* Bytes of one namespace's mountinfo read at most, a line at a time:
 * anyone may lengthen the tables of namespaces that copy theirs (their
 * FUSE mounts at mount points of 4 KiB, escaped four times, about 16 KiB
 * a line; fusermount's mount_max of 1,000 makes 16 MiB), and a cut made
 * for that user's sake would make root's namespaces, and so every user's
 * lost jobs, not known. */
#define NAMESPACE_TABLE_MAX (64u << 20)

/* The queries one mountinfo line answers (pid is its namespace's process). */
static void answer_from_line(struct mount_use_query *q, size_t n, uid_t uid, const char *line, pid_t pid)
{
	struct squash_mount m;
	char *copy, mdev[32];

	if (squash_mountinfo_parse_copy(line, &copy, &m) == 0) {
		snprintf(mdev, sizeof(mdev), "%u:%u", m.major, m.minor);
		for (size_t i = 0; i < n; i++)
			if (asks_about(&q[i], uid) && !strcmp(mdev, q[i].id.dev) &&
			    !propagated_copy(&m, &q[i].id) && strcmp(m.mount_point, q[i].point))
				q[i].user = pid;
	}
	free(copy);
}

/* Answers the queries from the mountinfo at path a line at a time (a long
 * table is never held whole), reading at most max bytes; returns the
 * bytes read, *cut when max came before the end. A process gone answers
 * nothing. */
static size_t answer_from_file(struct mount_use_query *q, size_t n, uid_t uid, const char *path,
			       pid_t pid, size_t max, bool *cut)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0, spent = 0;
	ssize_t k;

	*cut = false;
	if (!f)
		return 0;
	while ((k = getline(&line, &cap, f)) > 0) {
		spent += (size_t)k;
		if (spent > max) {
			*cut = true;
			break;
		}
		answer_from_line(q, n, uid, line, pid);
	}
	/* Out of memory for a line is not knowing, as a cut is. */
	if (k < 0 && !feof(f))
		*cut = true;
	free(line);
	fclose(f);
	return spent;
}

/* Whether any query is open for a process of uid. */
static bool any_open(const struct mount_use_query *q, size_t n, uid_t uid)
{
	for (size_t i = 0; i < n; i++)
		if (asks_about(&q[i], uid))
			return true;
	return false;
}

/* uid's spending this round (added when new); NULL when out of memory. */
static struct uid_spent *spent_of(struct uid_spent **spent, size_t *n, uid_t uid)
{
	for (size_t i = 0; i < *n; i++)
		if ((*spent)[i].uid == uid)
			return &(*spent)[i];
	struct uid_spent *grown = realloc(*spent, (*n + 1) * sizeof(**spent));
	if (!grown)
		return NULL;
	*spent = grown;
	grown[*n] = (struct uid_spent){ uid, 0 };
	return &grown[(*n)++];
}

static void give_up_on(struct mount_use_query *q, size_t n, uid_t uid)
{
	for (size_t i = 0; i < n; i++)
		if (q[i].user == 0 && q[i].uid == uid)
			q[i].user = -1;
}

void mount_users_find_all(struct mount_use_query *q, size_t n, size_t budget_per_uid)
{
	struct stat own;
	ino_t *seen = NULL;
	size_t n_seen = 0, cap_seen = 0, n_spent = 0;
	struct uid_spent *spent = NULL;

	for (size_t i = 0; i < n; i++)
		q[i].user = q[i].id.dev[0] ? 0 : -2; /* -2: nothing to ask (reset below) */
	DIR *proc = stat("/proc/self/ns/mnt", &own) == 0 ? opendir("/proc") : NULL;
	for (struct dirent *de; proc && (de = readdir(proc));) {
		char path[300];
		struct stat ns;
		uid_t owner;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		/* Its uids, not /proc/PID's owner: that is root for any process
		 * its user made non-dumpable, which would escape the budget. */
		int dir = openat(dirfd(proc), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		bool known = dir >= 0 && proc_uids_owner(dir, &owner);
		if (dir >= 0)
			close(dir);
		if (!known || !any_open(q, n, owner))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", de->d_name);
		if (stat(path, &ns) < 0 || ns.st_ino == own.st_ino)
			continue;
		bool done = false;
		for (size_t i = 0; i < n_seen && !done; i++)
			done = seen[i] == ns.st_ino;
		if (done)
			continue;
		if (n_seen == cap_seen) {
			size_t cap = cap_seen ? 2 * cap_seen : 256;
			ino_t *grown = realloc(seen, cap * sizeof(*seen));
			if (!grown) {
				/* Not knowing is keeping: every open query. */
				for (size_t i = 0; i < n; i++)
					if (q[i].user == 0)
						q[i].user = -1;
				break;
			}
			seen = grown;
			cap_seen = cap;
		}
		seen[n_seen++] = ns.st_ino;
		struct uid_spent *u = owner && budget_per_uid ? spent_of(&spent, &n_spent, owner) : NULL;
		if (owner && budget_per_uid && (!u || u->bytes >= budget_per_uid)) {
			give_up_on(q, n, owner);
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%s/mountinfo", de->d_name);
		size_t max = u && budget_per_uid - u->bytes < NAMESPACE_TABLE_MAX ? budget_per_uid - u->bytes
										 : NAMESPACE_TABLE_MAX;
		bool cut;
		size_t len = answer_from_file(q, n, owner, path, (pid_t)atoi(de->d_name), max, &cut);
		if (cut) {
			/* What is left unread may hold a mount asked about, so
			 * not knowing is keeping for every query this namespace
			 * could answer. */
			for (size_t i = 0; i < n; i++)
				if (asks_about(&q[i], owner))
					q[i].user = -1;
		}
		if (u && (u->bytes += len) >= budget_per_uid)
			give_up_on(q, n, owner); /* what is left unread may hold it */
	}
	if (proc)
		closedir(proc);
	for (size_t i = 0; i < n; i++)
		if (q[i].user == -2)
			q[i].user = 0;
	free(seen);
	free(spent);
}

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

pid_t mount_users_find(const struct mount_identity *id)
{
	struct stat own;
	ino_t seen[1024];
	size_t n_seen = 0;
	pid_t found = 0;

	if (stat("/proc/self/ns/mnt", &own) < 0)
		return 0;
	DIR *proc = opendir("/proc");
	if (!proc)
		return 0;
	for (struct dirent *de; !found && (de = readdir(proc));) {
		char path[300];
		struct stat ns;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/mnt", de->d_name);
		if (stat(path, &ns) < 0 || ns.st_ino == own.st_ino)
			continue;
		bool done = false;
		for (size_t i = 0; i < n_seen && !done; i++)
			done = seen[i] == ns.st_ino;
		if (done)
			continue;
		if (n_seen < sizeof(seen) / sizeof(seen[0]))
			seen[n_seen++] = ns.st_ino;
		snprintf(path, sizeof(path), "/proc/%s/mountinfo", de->d_name);
		char *info = mount_users_read_file(path, 4 << 20);
		if (!info)
			continue;
		for (const char *line = info; line && *line && !found; line = squash_mountinfo_next_line(line)) {
			struct squash_mount m;
			char *copy, mdev[32];
			if (squash_mountinfo_parse_copy(line, &copy, &m) == 0) {
				snprintf(mdev, sizeof(mdev), "%u:%u", m.major, m.minor);
				if (!strcmp(mdev, id->dev) && !propagated_copy(&m, id))
					found = (pid_t)atoi(de->d_name);
			}
			free(copy);
		}
		free(info);
	}
	closedir(proc);
	return found;
}

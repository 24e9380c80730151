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

/* The number after tag ("shared:" or "master:") among the optional fields
 * of one mountinfo line (fields 7 up to the lone "-"), or 0. */
static unsigned long optional_field(const char *line, const char *tag)
{
	const char *end = strchr(line, '\n');
	size_t taglen = strlen(tag);
	int field = 0;

	if (!end)
		end = line + strlen(line);
	for (const char *p = line; p < end;) {
		while (p < end && *p == ' ')
			p++;
		const char *q = p;
		while (q < end && *q != ' ')
			q++;
		if (++field > 6) {
			if (q - p == 1 && *p == '-')
				break;
			if ((size_t)(q - p) > taglen && !strncmp(p, tag, taglen))
				return strtoul(p + taglen, NULL, 10);
		}
		p = q;
	}
	return 0;
}

static const char *next_line(const char *line)
{
	const char *nl = strchr(line, '\n');
	return nl ? nl + 1 : NULL;
}

void mount_users_identity(const char *mountinfo, const char *path, struct mount_identity *id)
{
	id->dev[0] = '\0';
	id->peer_group = 0;
	for (const char *line = mountinfo; line && *line; line = next_line(line)) {
		char mdev[32], copy[PATH_MAX + 256];
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		if (len >= sizeof(copy) || sscanf(line, "%*s %*s %31s", mdev) != 1)
			continue;
		memcpy(copy, line, len);
		copy[len] = '\0';
		const char *mp = squash_mountinfo_mount_point(copy);
		if (mp && !strcmp(mp, path)) {
			snprintf(id->dev, sizeof(id->dev), "%s", mdev);
			id->peer_group = optional_field(line, "shared:");
			return;
		}
	}
}

/* Whether a mountinfo line of another namespace is a copy that mount
 * propagation keeps in step with ours. */
static bool propagated_copy(const char *line, const struct mount_identity *id)
{
	return id->peer_group && (optional_field(line, "shared:") == id->peer_group ||
				  optional_field(line, "master:") == id->peer_group);
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
		for (const char *line = info; line && *line && !found; line = next_line(line)) {
			char mdev[32];
			if (sscanf(line, "%*s %*s %31s", mdev) == 1 && !strcmp(mdev, id->dev) &&
			    !propagated_copy(line, id))
				found = (pid_t)atoi(de->d_name);
		}
		free(info);
	}
	closedir(proc);
	return found;
}

#include "config.h"

#include "process/reader_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "util/log.h"

#define CGROUP2_MAGIC 0x63677270
#define CGROUP_ROOT "/sys/fs/cgroup"

/* Set once at start, read-only afterwards. */
/* Short enough that every file below fits PATH_MAX. */
#define BASE_MAX 1024
static char bases[READER_CGROUP_FILES][BASE_MAX]; /* "" : unused */
static bool v2;
static unsigned tasks_limit;
static unsigned long long memory_limit;

static int write_text(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];
	int fd, rc = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, text, strlen(text)) < 0)
		rc = -1;
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* squashd's own cgroup in a hierarchy: the path after "0::" (v2) or after
 * the v1 line naming controller, from /proc/self/cgroup. */
static int own_cgroup(const char *controller, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[PATH_MAX + 64];
	int rc = -1;

	if (!f)
		return -1;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;

		if (!second)
			continue;
		*second = '\0';
		line[strcspn(line, "\n")] = '\0';
		second[1 + strcspn(second + 1, "\n")] = '\0';
		bool match = controller ? strstr(first + 1, controller) != NULL
					: (first[1] == '\0' && !strcmp(line, "0"));
		if (match && (size_t)snprintf(out, len, "%s", second + 1) < len)
			rc = 0;
	}
	fclose(f);
	return rc;
}

static bool is_cgroup2(const char *path)
{
	struct statfs s;

	return statfs(path, &s) == 0 && (unsigned long)s.f_type == CGROUP2_MAGIC;
}

/* Moves every process of dir's cgroup.procs to to/cgroup.procs. */
static int move_processes(const char *dir, const char *to)
{
	char path[PATH_MAX + 32], line[32];
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (write_text(to, "cgroup.procs", line) < 0 && errno != ESRCH)
			rc = -1;
	}
	fclose(f);
	return rc;
}

/* v2 below a delegated cgroup (own is not the root): squashd and its
 * spawner go to own/daemon, readers to own/readers. */
static int init_v2(const char *own, const char *node_name, char *why, size_t whylen)
{
	char dir[BASE_MAX - 16], daemon_dir[BASE_MAX];

	if (!strcmp(own, "/")) {
		/* The root cgroup may hold processes and hand controllers down. */
		snprintf(bases[0], sizeof(bases[0]), CGROUP_ROOT "/squashd-readers.%s", node_name);
		if (mkdir(bases[0], 0755) < 0 && errno != EEXIST) {
			snprintf(why, whylen, "mkdir %s: %s", bases[0], strerror(errno));
			return -1;
		}
		(void)write_text(CGROUP_ROOT, "cgroup.subtree_control", "+pids +memory");
		if (write_text(bases[0], "cgroup.subtree_control", "+pids +memory") < 0) {
			snprintf(why, whylen, "enabling pids and memory in %s: %s", bases[0], strerror(errno));
			return -1;
		}
		return 0;
	}
	if ((size_t)snprintf(dir, sizeof(dir), CGROUP_ROOT "%s", own) >= sizeof(dir)) {
		snprintf(why, whylen, "squashd's cgroup path is too long");
		return -1;
	}
	snprintf(daemon_dir, sizeof(daemon_dir), "%s/daemon", dir);
	if (mkdir(daemon_dir, 0755) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "mkdir %s: %s (is squashd.service delegated, Delegate=yes?)", daemon_dir,
			 strerror(errno));
		return -1;
	}
	if (move_processes(dir, daemon_dir) < 0 ||
	    write_text(dir, "cgroup.subtree_control", "+pids +memory") < 0) {
		snprintf(why, whylen, "making %s a delegated cgroup: %s (is squashd.service delegated, Delegate=yes?)",
			 dir, strerror(errno));
		return -1;
	}
	snprintf(bases[0], sizeof(bases[0]), "%.*s/readers", (int)sizeof(dir), dir);
	if ((mkdir(bases[0], 0755) < 0 && errno != EEXIST) ||
	    write_text(bases[0], "cgroup.subtree_control", "+pids +memory") < 0) {
		snprintf(why, whylen, "%s: %s", bases[0], strerror(errno));
		return -1;
	}
	(void)node_name;
	return 0;
}

/* v1: the pids and memory hierarchies, below squashd's own cgroup there. */
static int init_v1(const char *node_name, char *why, size_t whylen)
{
	static const char *const controllers[READER_CGROUP_FILES] = { "pids", "memory" };

	for (size_t i = 0; i < READER_CGROUP_FILES; i++) {
		char own[BASE_MAX], mnt[64];

		snprintf(mnt, sizeof(mnt), CGROUP_ROOT "/%s", controllers[i]);
		if (own_cgroup(controllers[i], own, sizeof(own)) < 0 || access(mnt, W_OK) < 0) {
			snprintf(why, whylen, "no cgroup v1 %s hierarchy at %s", controllers[i], mnt);
			return -1;
		}
		if ((size_t)snprintf(bases[i], sizeof(bases[i]), "%s%s/squashd-readers.%s", mnt,
				     strcmp(own, "/") ? own : "", node_name) >= sizeof(bases[i]) ||
		    (mkdir(bases[i], 0755) < 0 && errno != EEXIST)) {
			snprintf(why, whylen, "mkdir %.*s: %s", BASE_MAX, bases[i], strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The instance's name below a shared parent: the node's, and for a
 * squashd with a state_dir of its own (several on one host: Slurm's
 * multiple-slurmd mode, test clusters) a hash of that too, so that one
 * squashd's cleanup never removes another's cgroups. */
static void instance_name(const char *node_name, const char *state_dir, char *out, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	if (!strcmp(state_dir, "/run/squashd")) {
		snprintf(out, len, "%.64s", node_name);
		return;
	}
	for (const char *c = state_dir; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	snprintf(out, len, "%.64s-%08x", node_name, (unsigned)h);
}

int reader_cgroup_init(const char *mode, const char *node_name, const char *state_dir,
		       unsigned tasks_max, unsigned long long memory_max)
{
	char own[BASE_MAX], why[PATH_MAX + 256] = "", name[80];
	int rc;

	memset(bases, 0, sizeof(bases));
	tasks_limit = tasks_max;
	memory_limit = memory_max;
	if (!strcmp(mode, "no")) {
		log_info("reader cgroups are off (reader_cgroups = no): FUSE servers run in squashd's cgroup");
		return 0;
	}
	v2 = is_cgroup2(CGROUP_ROOT) && own_cgroup(NULL, own, sizeof(own)) == 0;
	instance_name(node_name, state_dir, name, sizeof(name));
	rc = v2 ? init_v2(own, name, why, sizeof(why)) : init_v1(name, why, sizeof(why));
	if (rc < 0) {
		memset(bases, 0, sizeof(bases));
		log_error("users' FUSE servers run without cgroups of their own (no reader_tasks_max or "
			  "reader_memory_max): %s", why);
		return -1;
	}
	char tasks[32] = "no limit", memory[32] = "no limit";
	if (tasks_limit)
		snprintf(tasks, sizeof(tasks), "%u", tasks_limit);
	if (memory_limit)
		snprintf(memory, sizeof(memory), "%llu bytes", memory_limit);
	log_info("users' FUSE servers run in cgroups of their own below %s (cgroup %s; tasks: %s, memory: %s)",
		 bases[0], v2 ? "v2" : "v1", tasks, memory);
	return 0;
}

/* Writes a limit unless it is already there (a reader of the user may be
 * running: rewriting the same value is harmless, but skip the syscall). */
static int set_limit(const char *dir, const char *file, unsigned long long value)
{
	char text[32];

	if (value == 0)
		snprintf(text, sizeof(text), v2 || strcmp(file, "memory.limit_in_bytes") ? "max" : "-1");
	else
		snprintf(text, sizeof(text), "%llu", value);
	return write_text(dir, file, text);
}

int reader_cgroup_prepare(uid_t uid, struct reader_cgroup_join *join)
{
	memset(join, 0, sizeof(*join));
	for (size_t i = 0; i < READER_CGROUP_FILES; i++) {
		char dir[PATH_MAX];

		if (!bases[i][0])
			continue;
		/* The base again first: an admin may have removed it. */
		if (mkdir(bases[i], 0755) < 0 && errno != EEXIST) {
			log_error("cannot make the reader cgroup %s: %s", bases[i], strerror(errno));
			return -1;
		}
		if ((size_t)snprintf(dir, sizeof(dir), "%s/uid-%u", bases[i], (unsigned)uid) >= sizeof(dir) ||
		    (mkdir(dir, 0755) < 0 && errno != EEXIST)) {
			log_error("cannot make the reader cgroup %s: %s", dir, strerror(errno));
			return -1;
		}
		bool pids = v2 || i == 0, memory = v2 || i == 1;
		if ((pids && set_limit(dir, "pids.max", tasks_limit) < 0) ||
		    (memory && set_limit(dir, v2 ? "memory.max" : "memory.limit_in_bytes", memory_limit) < 0)) {
			log_error("cannot set the limits of the reader cgroup %s: %s", dir, strerror(errno));
			return -1;
		}
		if ((size_t)snprintf(join->procs[i], sizeof(join->procs[i]), "%s/cgroup.procs", dir) >=
		    sizeof(join->procs[i]))
			return -1;
	}
	return 0;
}

const char *reader_cgroup_base(void)
{
	return bases[0];
}

void reader_cgroup_cleanup(void)
{
	for (size_t i = 0; i < READER_CGROUP_FILES; i++) {
		DIR *d;
		struct dirent *e;

		if (!bases[i][0] || !(d = opendir(bases[i])))
			continue;
		while ((e = readdir(d))) {
			char dir[PATH_MAX];

			if (strncmp(e->d_name, "uid-", 4) ||
			    (size_t)snprintf(dir, sizeof(dir), "%s/%s", bases[i], e->d_name) >= sizeof(dir))
				continue;
			(void)rmdir(dir); /* EBUSY: a reader still runs there (it outlives us) */
		}
		closedir(d);
		/* The base of a delegated cgroup stays (squashd's own is its
		 * sibling); one of ours goes when empty. */
		if (!v2 || strstr(bases[i], "/squashd-readers."))
			(void)rmdir(bases[i]);
	}
}

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
#include <unistd.h>

#include "clock.h"
#include "process/cgroup_kill.h"
#include "process/reader_cgroup_plan.h"
#include "process/reader_scope.h"
#include "util/log.h"
#include "util/mountinfo_kept.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
/* mountinfo of a node with thousands of mounts (jobs' binds) */
#define PROC_TEXT_MAX (4 * 1024 * 1024)

/* Set once at start, read-only afterwards. */
/* Short enough that every file below fits PATH_MAX. */
#define BASE_MAX 1024
static char bases[READER_CGROUP_FILES][BASE_MAX]; /* "" : unused */
static bool v2;
static bool under_systemd; /* slices and scopes made by systemd */
static char instance[80];  /* "" for the node's one squashd */
static char problem[PATH_MAX + 256];
static unsigned tasks_limit;
static unsigned long long memory_limit;
static unsigned cpu_weight = 100;
static bool v2_cpu; /* v2: the cpu controller is enabled for users' cgroups */

static int write_text_path(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -1;
	if (write(fd, text, strlen(text)) < 0)
		rc = -1;
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

static int write_text(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return write_text_path(path, text);
}

/* The mountinfo lines the plan reads: the cgroup file systems and what
 * is mounted at or below their root. */
static bool cgroup_mount(const struct squash_mount *m, void *unused)
{
	(void)unused;
	return !strcmp(m->fstype, "cgroup") || !strcmp(m->fstype, "cgroup2") ||
	       mountinfo_below(m, (void *)"/sys/fs/cgroup");
}

/* The whole of a /proc text file, NUL-terminated (malloc'd), or NULL. */
static char *read_proc_text(const char *path)
{
	FILE *f = fopen(path, "re");
	size_t cap = 0, used = 0;
	char *text = NULL;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - used < 4096) {
			size_t bigger = cap ? cap * 2 : 64 * 1024;
			char *t = bigger <= PROC_TEXT_MAX ? realloc(text, bigger) : NULL;

			if (!t) {
				free(text);
				fclose(f);
				return NULL;
			}
			text = t;
			cap = bigger;
		}
		size_t n = fread(text + used, 1, cap - used - 1, f);
		if (n == 0)
			break;
		used += n;
	}
	fclose(f);
	text[used] = '\0';
	return text;
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

static int make_dir(const char *dir, char *why, size_t whylen)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "mkdir %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Makes what the plan says. */
static int apply(const struct reader_cgroup_plan *plan, char *why, size_t whylen)
{
	switch (plan->kind) {
	case READER_CGROUPS_SYSTEMD:
		return 0; /* systemd makes them, as readers start */
	case READER_CGROUPS_V2_ROOT:
		if (make_dir(plan->bases[0], why, whylen) < 0)
			return -1;
		(void)write_text(CGROUP_ROOT, "cgroup.subtree_control", "+pids +memory");
		if (write_text(plan->bases[0], "cgroup.subtree_control", "+pids +memory") < 0) {
			snprintf(why, whylen, "enabling pids and memory in %s: %s", plan->bases[0],
				 strerror(errno));
			return -1;
		}
		/* Optional (the CPU weight): a kernel without it still limits. */
		(void)write_text(CGROUP_ROOT, "cgroup.subtree_control", "+cpu");
		v2_cpu = write_text(plan->bases[0], "cgroup.subtree_control", "+cpu") == 0;
		return 0;
	case READER_CGROUPS_V2_DELEGATED:
		if (mkdir(plan->daemon_dir, 0755) < 0 && errno != EEXIST) {
			snprintf(why, whylen, "mkdir %s: %s (is squashd's cgroup delegated to it?)",
				 plan->daemon_dir, strerror(errno));
			return -1;
		}
		if (move_processes(plan->own, plan->daemon_dir) < 0 ||
		    write_text(plan->own, "cgroup.subtree_control", "+pids +memory") < 0) {
			snprintf(why, whylen, "making %s a delegated cgroup: %s (is it delegated to squashd?)",
				 plan->own, strerror(errno));
			return -1;
		}
		if (make_dir(plan->bases[0], why, whylen) < 0)
			return -1;
		if (write_text(plan->bases[0], "cgroup.subtree_control", "+pids +memory") < 0) {
			snprintf(why, whylen, "%s: %s", plan->bases[0], strerror(errno));
			return -1;
		}
		v2_cpu = write_text(plan->own, "cgroup.subtree_control", "+cpu") == 0 &&
			 write_text(plan->bases[0], "cgroup.subtree_control", "+cpu") == 0;
		return 0;
	case READER_CGROUPS_V1:
		for (size_t i = 0; i < READER_CGROUP_FILES; i++)
			if (plan->bases[i][0] && make_dir(plan->bases[i], why, whylen) < 0)
				return -1;
		return 0;
	case READER_CGROUPS_NONE:
		break;
	}
	snprintf(why, whylen, "%s", plan->why);
	return -1;
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
	static struct reader_cgroup_plan plan; /* large; once, at start */
	char why[PATH_MAX + 256] = "", name[80];
	char *mountinfo, *proc_cgroup;
	int rc;

	memset(bases, 0, sizeof(bases));
	problem[0] = instance[0] = '\0';
	v2 = under_systemd = v2_cpu = false;
	tasks_limit = tasks_max;
	memory_limit = memory_max;
	if (!strcmp(mode, "no")) {
		log_info("reader cgroups are off (reader_cgroups = no): FUSE servers run in squashd's cgroup");
		return 0;
	}
	instance_name(node_name, state_dir, name, sizeof(name));
	mountinfo = mountinfo_kept("/proc/self/mountinfo", cgroup_mount, NULL);
	proc_cgroup = read_proc_text("/proc/self/cgroup");
	rc = reader_cgroup_plan(mountinfo ? mountinfo : "", proc_cgroup ? proc_cgroup : "",
				reader_scope_systemd_running(), name, &plan);
	free(mountinfo);
	free(proc_cgroup);
	if (rc == 0 && plan.kind == READER_CGROUPS_SYSTEMD) {
		/* The node's one squashd needs no instance in its slices' names. */
		snprintf(instance, sizeof(instance), "%s", strcmp(state_dir, "/run/squashd") ? name : "");
		char probe[128];
		if (reader_scope_slice_name(instance, 0, probe, sizeof(probe)) < 0) {
			snprintf(why, sizeof(why), "node name %s too long for a systemd unit name", node_name);
			rc = -1;
		}
	}
	if (rc == 0)
		rc = apply(&plan, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%s", plan.why);
	if (rc < 0) {
		snprintf(problem, sizeof(problem),
			 "users' FUSE servers run without cgroups of their own (no reader_tasks_max or "
			 "reader_memory_max): %s", why);
		log_error("%s", problem);
		return -1;
	}
	under_systemd = plan.kind == READER_CGROUPS_SYSTEMD;
	v2 = plan.kind == READER_CGROUPS_V2_ROOT || plan.kind == READER_CGROUPS_V2_DELEGATED;
	for (size_t i = 0; i < READER_CGROUP_FILES; i++)
		snprintf(bases[i], sizeof(bases[i]), "%s", plan.bases[i]);
	char tasks[32] = "no limit", memory[32] = "no limit", cpu[48] = "none (no cpu controller)";
	if (tasks_limit)
		snprintf(tasks, sizeof(tasks), "%u", tasks_limit);
	if (memory_limit)
		snprintf(memory, sizeof(memory), "%llu bytes", memory_limit);
	if (under_systemd || v2_cpu || bases[2][0])
		snprintf(cpu, sizeof(cpu), "%u", cpu_weight);
	log_info("users' FUSE servers run in cgroups of their own below %s (%s; tasks: %s, memory: %s; "
		 "CPU weight: %s)",
		 bases[0], under_systemd ? "a systemd slice per user" : v2 ? "cgroup v2" : "cgroup v1",
		 tasks, memory, cpu);
	return 0;
}

void reader_cgroup_set_cpu_weight(unsigned weight)
{
	cpu_weight = weight;
}

const char *reader_cgroup_problem(void)
{
	return problem;
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
	join->uid = uid;
	if (under_systemd) {
		join->tasks_max = tasks_limit;
		join->memory_max = memory_limit;
		join->cpu_weight = cpu_weight;
		return reader_scope_slice_name(instance, uid, join->slice, sizeof(join->slice));
	}
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
		bool pids = v2 || i == 0, memory = v2 || i == 1, cpu = v2 ? v2_cpu : i == 2;
		if ((pids && set_limit(dir, "pids.max", tasks_limit) < 0) ||
		    (memory && set_limit(dir, v2 ? "memory.max" : "memory.limit_in_bytes", memory_limit) < 0)) {
			log_error("cannot set the limits of the reader cgroup %s: %s", dir, strerror(errno));
			return -1;
		}
		char weight[32];
		snprintf(weight, sizeof(weight), "%llu",
			 v2 ? (unsigned long long)cpu_weight : cpu_weight * 1024ULL / 100);
		if (cpu && write_text(dir, v2 ? "cpu.weight" : "cpu.shares", weight) < 0)
			log_warning("cannot set the CPU weight of the reader cgroup %s: %s", dir,
				    strerror(errno)); /* the limits above still hold */
		snprintf(join->dirs[i], sizeof(join->dirs[i]), "%s", dir);
	}
	return 0;
}

const char *reader_cgroup_base(void)
{
	return bases[0];
}

int reader_cgroup_join(const struct reader_cgroup_join *join, char *why, size_t whylen)
{
	for (size_t i = 0; i < READER_CGROUP_FILES; i++) {
		char own[PATH_MAX + 32];

		if (!join->dirs[i][0])
			continue;
		snprintf(own, sizeof(own), "%s/reader-%d", join->dirs[i], (int)getpid());
		if ((mkdir(own, 0755) < 0 && errno != EEXIST) ||
		    write_text(own, "cgroup.procs", "0") < 0) {
			snprintf(why, whylen, "cannot join the reader cgroup %s: %s", own,
				 strerror(errno));
			return -1;
		}
	}
	if (join->slice[0] && reader_scope_join(join->slice, join->uid, join->tasks_max, join->memory_max,
						join->cpu_weight, why, whylen) < 0)
		return -1;
	return 0;
}

void reader_cgroup_end(uid_t uid, pid_t pid)
{
	long long deadline = squash_now_ms() + READER_CGROUP_END_MS;
	int killed = 0;

	if (under_systemd) {
		reader_scope_end(uid, pid);
		return;
	}
	for (size_t i = 0; i < READER_CGROUP_FILES; i++) {
		char own[PATH_MAX];
		int n;

		if (!bases[i][0] || (size_t)snprintf(own, sizeof(own), "%s/uid-%u/reader-%d", bases[i],
						      (unsigned)uid, (int)pid) >= sizeof(own))
			continue;
		n = cgroup_kill_all(own, deadline);
		if (n > killed)
			killed = n;
	}
	if (killed > 0)
		log_warning("FUSE server %d of uid %u left %d process(es) behind; killed them",
			    (int)pid, (unsigned)uid, killed);
}

void reader_cgroup_where(struct reader_cgroup_where *w)
{
	bool unified = v2 || under_systemd;

	w->unified = unified;
	w->under_systemd = under_systemd;
	w->instance = instance;
	/* v1 keeps CPU time in the cpu hierarchy and memory in the memory one. */
	w->cpu_base = unified ? bases[0] : bases[2];
	w->memory_base = unified ? bases[0] : bases[1];
}

unsigned long long reader_cgroup_memory_limit(void)
{
	return memory_limit;
}

/* Removes the readers' own cgroups left in a user's (empty ones: a
 * reader that is gone). */
static void remove_reader_dirs(const char *user_dir)
{
	DIR *d = opendir(user_dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char dir[PATH_MAX];

		if (!strncmp(e->d_name, "reader-", 7) &&
		    (size_t)snprintf(dir, sizeof(dir), "%s/%s", user_dir, e->d_name) < sizeof(dir))
			(void)rmdir(dir); /* EBUSY: still in use */
	}
	closedir(d);
}

void reader_cgroup_cleanup(void)
{
	if (under_systemd) {
		reader_scope_cleanup(bases[0]);
		return;
	}
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
			remove_reader_dirs(dir);
			(void)rmdir(dir); /* EBUSY: a reader still runs there (it outlives us) */
		}
		closedir(d);
		/* The base of a delegated cgroup stays (squashd's own is its
		 * sibling); one of ours goes when empty. */
		if (!v2 || strstr(bases[i], "/squashd-readers."))
			(void)rmdir(bases[i]);
	}
}

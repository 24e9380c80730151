#include "config.h"
#include "slurm/local_steps.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array_grow.h"
#include "util/proc_uids.h"

#define TITLE_PREFIX "slurmstepd: ["
/* Enough for any title this reads; longer ones are not slurmstepd's. */
#define TITLE_MAX 256

/* Parses a decimal uint32 at *p, advancing it. */
static bool parse_u32(const char **p, const char *end, uint32_t *out)
{
	uint64_t v = 0;
	const char *s = *p;

	if (s >= end || !isdigit((unsigned char)*s))
		return false;
	while (s < end && isdigit((unsigned char)*s)) {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return false;
		s++;
	}
	*p = s;
	*out = (uint32_t)v;
	return true;
}

bool local_steps_parse_title(const char *title, size_t len, uint32_t *job_id, uint32_t *step_id)
{
	static const char *const special[] = { "batch", "extern", "interactive", "TBD" };
	const size_t plen = sizeof(TITLE_PREFIX) - 1;
	const char *p = title, *end;

	/* The title is one string; setproctitle may leave NULs after it. */
	end = memchr(title, '\0', len);
	if (!end)
		end = title + len;
	if ((size_t)(end - p) <= plen || memcmp(p, TITLE_PREFIX, plen))
		return false;
	p += plen;
	if (!parse_u32(&p, end, job_id) || *job_id == 0 || p >= end || *p != '.')
		return false;
	p++;
	if (p < end && isdigit((unsigned char)*p)) {
		if (!parse_u32(&p, end, step_id) || *step_id >= LOCAL_STEP_EXTERN)
			return false;
	} else {
		size_t i, n = 0;

		for (i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
			n = strlen(special[i]);
			if ((size_t)(end - p) >= n && !memcmp(p, special[i], n))
				break;
		}
		if (i == sizeof(special) / sizeof(special[0]))
			return false;
		p += n;
		*step_id = strcmp(special[i], "extern") ? LOCAL_STEP_SPECIAL : LOCAL_STEP_EXTERN;
	}
	/* "+N" (het component), then " stepmgr" or the closing bracket. */
	if (p < end && *p == '+') {
		uint32_t comp;

		p++;
		if (!parse_u32(&p, end, &comp))
			return false;
	}
	return p < end && (*p == ']' || *p == ' ');
}

static int add(struct local_steps *s, uint32_t job_id, uint32_t step_id, pid_t pid)
{
	if (array_reserve(&s->steps, &s->capacity, s->count + 1, sizeof(*s->steps), 32) < 0)
		return -1;
	s->steps[s->count].job_id = job_id;
	s->steps[s->count].step_id = step_id;
	s->steps[s->count].pid = pid;
	s->count++;
	return 0;
}

/* The inode of the UTS namespace link at path (relative to dirfd:
 * "uts:[4026531838]"), or 0: which node a process belongs to. */
static unsigned long node_of(int dirfd, const char *path)
{
	char link[64];
	ssize_t n = readlinkat(dirfd, path, link, sizeof link - 1);
	unsigned long ino = 0;

	if (n <= 0)
		return 0;
	link[n] = '\0';
	if (sscanf(link, "uts:[%lu]", &ino) != 1)
		return 0;
	return ino;
}

unsigned long local_steps_this_node(void)
{
	return node_of(AT_FDCWD, "/proc/self/ns/uts");
}

/* The program a process runs (its /proc exe link; no lock of the
 * process's is taken), without the " (deleted)" of a replaced binary;
 * false when it cannot be read. */
static bool exe_of(int dirfd, const char *path, char *out, size_t len)
{
	static const char deleted[] = " (deleted)";
	ssize_t n = readlinkat(dirfd, path, out, len - 1);
	size_t d = sizeof(deleted) - 1;

	if (n <= 0)
		return false;
	out[n] = '\0';
	if ((size_t)n > d && !strcmp(out + n - d, deleted))
		out[n - d] = '\0';
	return true;
}

ssize_t local_steps_root_title(int proc_root, int proc_dir, char *buf, size_t len)
{
	char exe[PATH_MAX], parent_exe[PATH_MAX], parent[32];
	const char *base;
	pid_t ppid;
	ssize_t n;
	int fd;

	/* slurmstepd runs as root, and anyone can title a process like it
	 * (exec -a): a user's look-alike would keep another user's job
	 * running for gc and stand in for its extern step in the job-end
	 * watch. Checked first: reading a process's cmdline waits for its
	 * memory map's lock, which a user's process can hold for ever (a read
	 * of its own memory that a FUSE server of its own never answers); its
	 * status and exe link do not. A root process may become a user's
	 * between the checks and the read, by exec: so only slurmstepd itself
	 * is read (its program named slurmstepd...), not its children (a task
	 * between fork and exec still runs slurmstepd, with its title), which
	 * are the ones that become the user's; slurmstepd itself never execs. */
	if (!proc_uids_are_with_parent(proc_dir, 0, &ppid) || !exe_of(proc_dir, "exe", exe, sizeof exe))
		return -1;
	/* slurmstepd, or Debian's slurmstepd-wlm behind the alternatives link. */
	base = strrchr(exe, '/');
	if (strncmp(base ? base + 1 : exe, "slurmstepd", 10))
		return -1;
	snprintf(parent, sizeof parent, "%d/exe", (int)ppid);
	if (ppid > 0 && exe_of(proc_root, parent, parent_exe, sizeof parent_exe) && !strcmp(parent_exe, exe))
		return -1;
	fd = openat(proc_dir, "cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len);
	close(fd);
	return n;
}

int local_steps_scan(const char *proc_root, unsigned long uts_inode, struct local_steps *out)
{
	DIR *proc = opendir(proc_root);
	struct dirent *de;
	int rc = 0;

	out->steps = NULL;
	out->count = out->capacity = 0;
	if (!proc)
		return -1;
	while ((de = readdir(proc)) != NULL) {
		char title[TITLE_MAX];
		uint32_t job, step;
		ssize_t n;
		int dir;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		dir = openat(dirfd(proc), de->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dir < 0)
			continue; /* gone meanwhile */
		n = local_steps_root_title(dirfd(proc), dir, title, sizeof title);
		if (n > 0 && local_steps_parse_title(title, (size_t)n, &job, &step) &&
		    (uts_inode == 0 || node_of(dir, "ns/uts") == uts_inode) &&
		    add(out, job, step, (pid_t)atoi(de->d_name)) != 0) {
			close(dir);
			rc = -1;
			errno = ENOMEM;
			break;
		}
		close(dir);
	}
	closedir(proc);
	if (rc != 0)
		local_steps_free(out);
	return rc;
}

bool local_steps_has_job(const struct local_steps *s, uint32_t job_id)
{
	for (size_t i = 0; i < s->count; i++)
		if (s->steps[i].job_id == job_id)
			return true;
	return false;
}

bool local_steps_has_step(const struct local_steps *s, uint32_t job_id, uint32_t step_id)
{
	for (size_t i = 0; i < s->count; i++)
		if (s->steps[i].job_id == job_id && s->steps[i].step_id == step_id)
			return true;
	return false;
}

const struct local_step *local_steps_job_step(const struct local_steps *s, uint32_t job_id)
{
	const struct local_step *any = NULL;

	for (size_t i = 0; i < s->count; i++) {
		if (s->steps[i].job_id != job_id)
			continue;
		if (s->steps[i].step_id == LOCAL_STEP_EXTERN)
			return &s->steps[i];
		any = &s->steps[i];
	}
	return any;
}

void local_steps_free(struct local_steps *s)
{
	free(s->steps);
	s->steps = NULL;
	s->count = s->capacity = 0;
}

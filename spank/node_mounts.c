/* Reaching the node-level mounts from a task (see node_mounts.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "array_grow.h"
#include "mount_root.h"
#include "mountinfo.h"
#include "node_mounts.h"
#include "squash_env.h"

/* squashd's namespace is the one that surely has the mounts: slurmstepd
 * may already run in a job namespace made before they were mounted
 * (EntireStepInNS, namespace/linux). A slurmstepd in a user namespace of
 * its own may not open it: falling back then would bind empty
 * directories. */
int squash_node_mounts_namespace(pid_t squashd_pid, char *err, size_t errlen)
{
	char path[64];
	int fd;

	if (squashd_pid > 0) {
		snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)squashd_pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && (errno == EACCES || errno == EPERM))
			snprintf(err, errlen, "the step runs in a user namespace of its own "
				 "(namespace/linux with CLONE_NEWUSER in namespace.yaml, or a "
				 "container), from which the node's mounts cannot be reached: "
				 "images need a job namespace without a user namespace. Ask "
				 "your administrator for one on this node (spank_squash(8), "
				 "SLURM CONFIGURATION), quoting this message");
		else if (fd < 0)
			snprintf(err, errlen, "cannot open the mount namespace of the node's mounts "
				 "(squashd's, %s): %s", path, strerror(errno));
		return fd;
	}
	fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		snprintf(err, errlen, "cannot open the mount namespace of the node's mounts: %s",
			 strerror(errno));
	return fd;
}

int squash_node_mounts_copy(int source_ns, const Squash__Response *resp, int *trees,
			    char *err, size_t errlen)
{
	int own = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC), rc = 0;

	if (own < 0) {
		snprintf(err, errlen, "cannot open the task's mount namespace: %s", strerror(errno));
		return -1;
	}
	if (setns(source_ns, CLONE_NEWNS) != 0) {
		snprintf(err, errlen, "cannot reach the node's mounts from the task's namespace: %s%s",
			 strerror(errno), errno == EPERM ?
			 " (a job namespace with a user namespace of its own cannot enter the node's; "
			 "see spank_squash(8))" : "");
		close(own);
		return -1;
	}
	for (size_t i = 0; i < resp->n_job_mounts && rc == 0; i++) {
		/* Images merged at one target share one source: bound once. */
		if (squash_mount_repeats_target(resp, i))
			continue;
		trees[i] = open_tree(AT_FDCWD, resp->job_mounts[i]->source,
				     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		if (trees[i] < 0) {
			snprintf(err, errlen, "cannot copy the mount of %s (%s): %s",
				 resp->job_mounts[i]->image, resp->job_mounts[i]->source, strerror(errno));
			rc = -1;
		} else if (!squash_is_mount_root(trees[i], "")) {
			snprintf(err, errlen, "the node's mount of %s (%s) is not there",
				 resp->job_mounts[i]->image, resp->job_mounts[i]->source);
			rc = -1;
		}
	}
	/* The task must never run on in the node's namespace. */
	if (setns(own, CLONE_NEWNS) != 0) {
		slurm_error("squash: cannot return to the task's mount namespace: %s", strerror(errno));
		_exit(127);
	}
	close(own);
	return rc;
}

/* Whether mount point field is dir or below it (dir NULL: no). */
static bool at_or_below(const char *field, const char *dir)
{
	size_t dlen = dir ? strlen(dir) : 0;

	return dir && !strncmp(field, dir, dlen) && (field[dlen] == '/' || field[dlen] == '\0');
}

/* What the task's namespace copied from the host at or below dir or dir2:
 * the node-level mounts of this job and of others. The step's binds stay
 * (they are mounts of their own); without this a step would pin other
 * jobs' FUSE servers and loop devices until it ends. */
int squash_node_mounts_detach(const char *dir, const char *dir2, char *err, size_t errlen)
{
	size_t n = 0, cap = 0;
	char **points = NULL, *line = NULL;
	size_t linecap = 0;
	int left = 0;
	/* One read for both: any user can make mountinfo long (a FUSE mount
	 * of theirs at a long path is 16 KiB a line), and every task of every
	 * job reads it here. */
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f) {
		snprintf(err, errlen, "cannot read /proc/self/mountinfo: %s", strerror(errno));
		return -1;
	}
	while (getline(&line, &linecap, f) > 0) {
		char *field = squash_mountinfo_mount_point(line);

		if (!field)
			continue;
		if (!at_or_below(field, dir) && !at_or_below(field, dir2))
			continue;
		if (array_reserve(&points, &cap, n + 1, sizeof(*points), 16) < 0)
			break;
		if (!(points[n] = strdup(field)))
			break;
		n++;
	}
	free(line);
	fclose(f);
	/* Longest path first: children before their parents. */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strlen(points[j]) > strlen(points[i])) {
				char *t = points[i];
				points[i] = points[j];
				points[j] = t;
			}
	for (size_t i = 0; i < n; i++) {
		if (umount2(points[i], MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL &&
		    errno != ENOENT) {
			if (!left)
				snprintf(err, errlen, "cannot detach %s from the step: %s", points[i],
					 strerror(errno));
			left++;
		}
		free(points[i]);
	}
	free(points);
	return left;
}

/* Binding the job's node-level mounts into a step (see step_bind.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "imagespec.h"
#include "job_request.h"
#include "mountinfo.h"
#include "prolog_note.h"
#include "squash_env.h"
#include "step_bind.h"
#include "step_images.h"
#include "target.h"

/* Why this step cannot use its images; NULL when all is well. Kept from
 * slurmstepd's setup until the tasks print it: errors logged earlier do not
 * reach the user reliably. */
static char *step_error;
static char step_error_oom[] = "squash: cannot set up the job's images (out of memory)";

/* What the tasks attach, from slurmstepd's set-up until it exits. */
static Squash__Response *step_mounts;
static uint32_t step_job_id;
static int source_ns = -1; /* see open_source_namespace */

void squash_step_fail(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (step_error)
		return; /* the first reason is the one that matters */
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = step_error_oom;
	va_end(ap);
	slurm_error("%s", msg);
	step_error = msg;
}

void squash_step_cleanup(void)
{
	if (step_error != step_error_oom)
		free(step_error);
	step_error = NULL;
	if (step_mounts)
		squash__response__free_unpacked(step_mounts, NULL);
	step_mounts = NULL;
	if (source_ns >= 0)
		close(source_ns);
	source_ns = -1;
}

/* Opens one directory below dirfd without following a symlink; shown is
 * the path up to and including name, for messages. */
static int open_component(int dirfd, const char *name, const char *shown,
			  char *err, size_t errlen)
{
	struct stat st;
	int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: %s", shown, strerror(errno));
	} else if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "%s is a symbolic link", shown);
	} else if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", shown);
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

/* Walks path from dirfd, which stands for the part of path before skip
 * bytes, one component at a time and never through a symlink. With create,
 * missing directories are made (mode 0755 whatever the umask). Returns an
 * O_PATH descriptor of the last directory, or -1 with err. */
static int walk(int dirfd, const char *path, size_t skip, bool create,
		char *err, size_t errlen)
{
	char buf[SQUASH_PATH_MAX];
	char *p, *slash;
	int fd;

	if (strlen(path) >= sizeof buf || skip > strlen(path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -1;
	}
	strcpy(buf, path);
	fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	for (p = buf + skip; *p; p = slash + 1) {
		int next;

		slash = strchr(p, '/');
		if (slash)
			*slash = '\0';
		if (!strcmp(p, ".") || !strcmp(p, "..") || !*p) {
			snprintf(err, errlen, "%s: not a normalised path", path);
			close(fd);
			return -1;
		}
		if (create && mkdirat(fd, p, 0755) == 0) {
			/* fchmodat: the umask must not make the target unreachable. */
			fchmodat(fd, p, 0755, 0);
		} else if (create && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", buf, strerror(errno));
			close(fd);
			return -1;
		}
		next = open_component(fd, p, buf, err, errlen);
		close(fd);
		if (next < 0)
			return -1;
		fd = next;
		if (!slash)
			break;
		*slash = '/';
	}
	return fd;
}

static int walk_from_root(const char *path, char *err, size_t errlen)
{
	int root, fd;

	if (path[0] != '/') {
		snprintf(err, errlen, "%s: not an absolute path", path);
		return -1;
	}
	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		snprintf(err, errlen, "/: %s", strerror(errno));
		return -1;
	}
	fd = walk(root, path, 1, false, err, errlen);
	close(root);
	return fd;
}

static void fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* Mounts a small tmpfs on base (which must exist) and returns a descriptor
 * of the tmpfs' root, so targets below base are made in the step only. */
static int mount_base(const char *base, char *err, size_t errlen)
{
	char at[64], why[512];
	int fd = walk_from_root(base, why, sizeof why);

	if (fd < 0) {
		snprintf(err, errlen, "base directory %s: %s", base, why);
		return -1;
	}
	fd_path(fd, at, sizeof at);
	if (mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) {
		snprintf(err, errlen, "cannot mount a tmpfs on %s: %s", base, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	/* A fresh lookup lands on the tmpfs, not on the directory below it. */
	fd = walk_from_root(base, why, sizeof why);
	if (fd < 0)
		snprintf(err, errlen, "base directory %s: %s", base, why);
	return fd;
}

/* True when target lies strictly below base. */
static bool below(const char *target, const char *base)
{
	size_t n = strlen(base);

	return !strncmp(target, base, n) && target[n] == '/' && target[n + 1];
}

/* Attaches tree (a detached copy of the node-level mount, open_tree) on
 * target, read-only (unless it is the job's writable overlay), nosuid,
 * nodev. The attributes are set before the mount appears. */
static int bind_one(const Squash__JobMount *jm, int tree, const char *base, int basefd,
		    char *err, size_t errlen)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			    (jm->has_writable && jm->writable ? 0 : MOUNT_ATTR_RDONLY),
	};
	char why[512];
	int fd;

	if (squash_is_system_path(jm->target)) {
		snprintf(err, errlen, "refusing to mount %s on system path %s", jm->image, jm->target);
		return -1;
	}
	if (base && below(jm->target, base))
		fd = walk(basefd, jm->target, strlen(base) + 1, true, why, sizeof why);
	else
		fd = walk_from_root(jm->target, why, sizeof why);
	if (fd < 0) {
		snprintf(err, errlen, "cannot mount %s on %s: %s", jm->image, jm->target, why);
		return -1;
	}
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
		snprintf(err, errlen, "cannot make %s %s on %s: %s", jm->image,
			 attr.attr_set & MOUNT_ATTR_RDONLY ? "read-only" : "nosuid,nodev",
			 jm->target, strerror(errno));
		close(fd);
		return -1;
	}
	if (move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
		snprintf(err, errlen, "cannot mount %s on %s: attaching %s: %s", jm->image,
			 jm->target, jm->source, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int squash_step_bind_mounts(const Squash__Response *resp, const int *trees, char *err,
			    size_t errlen)
{
	const char *base = resp->base_dir && *resp->base_dir ? resp->base_dir : NULL;
	int basefd = -1, rc = 0;

	if (resp->n_job_mounts == 0) {
		snprintf(err, errlen, "squashd reported no images for this job");
		return -1;
	}
	if (base) {
		if (base[0] != '/' || squash_is_system_path(base)) {
			snprintf(err, errlen, "squashd reported an unusable base directory %s", base);
			return -1;
		}
		basefd = mount_base(base, err, errlen);
		if (basefd < 0)
			return -1;
	}
	for (size_t i = 0; i < resp->n_job_mounts && rc == 0; i++)
		if (trees[i] >= 0) /* -1: merged with an earlier image at its target */
			rc = bind_one(resp->job_mounts[i], trees[i], base, basefd, err, errlen);
	if (basefd >= 0)
		close(basefd);
	return rc;
}

/* Detaches, in this step's namespace only, every mount at or below dir:
 * the node-level mounts the namespace copied from the host, the job's own
 * and other jobs'. The step's binds stay (they are mounts of their own);
 * without this a step would pin other jobs' FUSE servers and loop devices
 * until it ends. Deepest first; returns the number left, -1 on error. */
static int detach_below(const char *dir, char *err, size_t errlen)
{
	size_t dlen = strlen(dir), n = 0, cap = 0;
	char **points = NULL, *line = NULL;
	size_t linecap = 0;
	int left = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f) {
		snprintf(err, errlen, "cannot read /proc/self/mountinfo: %s", strerror(errno));
		return -1;
	}
	while (getline(&line, &linecap, f) > 0) {
		char *field = squash_mountinfo_mount_point(line);

		if (!field)
			continue;
		if (strncmp(field, dir, dlen) || (field[dlen] != '/' && field[dlen] != '\0'))
			continue;
		if (n == cap) {
			char **grown = realloc(points, (cap ? 2 * cap : 16) * sizeof(*points));
			if (!grown)
				break;
			points = grown;
			cap = cap ? 2 * cap : 16;
		}
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

/* The tasks' environment (squash_env.h). Returns 0 or -1 with err. */
static int export_env(spank_t sp, const Squash__Response *resp, char *err,
		      size_t errlen)
{
	struct squash_task_env env;
	spank_err_t rc = ESPANK_SUCCESS;

	if (squash_task_env_build(resp, &env) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < SQUASH_TASK_ENV_VARS && rc == ESPANK_SUCCESS; i++)
		rc = spank_setenv(sp, env.name[i], env.value[i], 1);
	if (rc != ESPANK_SUCCESS)
		snprintf(err, errlen, "cannot set the tasks' environment: %s", spank_strerror(rc));
	squash_task_env_free(&env);
	return rc == ESPANK_SUCCESS ? 0 : -1;
}

/* The mount namespace that holds the node-level mounts: squashd's own
 * (where it made them); slurmstepd's only when squashd's pid is unknown.
 * squashd's is the one that surely has them: slurmstepd may already run
 * in a job namespace made before they were mounted (EntireStepInNS,
 * namespace/linux). A slurmstepd in a user namespace of its own may not
 * open it: falling back then would bind empty directories. */
static int open_source_namespace(pid_t squashd_pid, char *err, size_t errlen)
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
				 "images need a job namespace without a user namespace; tell "
				 "the administrators (see spank_squash(8))");
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

/* Whether tree (an open_tree clone) is a whole mount: the node-level
 * mount of an image, not the directory under it in a namespace that
 * lacks the mount. True where the kernel cannot tell (before 5.8). */
static bool is_mount_root(int tree)
{
	struct statx stx;

	if (statx(tree, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) != 0 ||
	    !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return true;
	return stx.stx_attributes & STATX_ATTR_MOUNT_ROOT;
}

/* In slurmstepd, before the tasks are forked: exports the mounts to the
 * tasks' environment and keeps what each task needs to bind them. */
static void prepare(spank_t sp, uint32_t job_id, Squash__Response *resp, pid_t squashd_pid)
{
	char why[1024];

	if (export_env(sp, resp, why, sizeof why) != 0) {
		squash_step_fail("squash: job %u: %s", job_id, why);
		return;
	}
	source_ns = open_source_namespace(squashd_pid, why, sizeof why);
	if (source_ns < 0) {
		squash_step_fail("squash: job %u: %s", job_id, why);
		return;
	}
	step_mounts = resp;
	step_job_id = job_id;
}

/* Detached copies of the node-level mounts, made inside the namespace
 * that holds them; the caller is back in its own namespace on return
 * (0), or must not go on (-1). */
static int copy_mounts(const Squash__Response *resp, int *trees, char *err, size_t errlen)
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
		} else if (!is_mount_root(trees[i])) {
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

/* In each task, as root, after Slurm has put it in the job's namespace
 * (job_container/tmpfs, namespace/tmpfs, namespace/linux do so here, and
 * would replace any namespace slurmstepd made earlier): makes the task's
 * own mount namespace and attaches the job's mounts in it. */
static int attach(const Squash__Response *resp, char *err, size_t errlen)
{
	int *trees = calloc(resp->n_job_mounts ? resp->n_job_mounts : 1, sizeof(*trees));
	int rc = -1;

	if (!trees) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < resp->n_job_mounts; i++)
		trees[i] = -1;
	if (unshare(CLONE_NEWNS) != 0) {
		snprintf(err, errlen, "cannot make a private mount namespace: %s", strerror(errno));
	} else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		/* Nothing the task mounts may propagate back to the host. */
		snprintf(err, errlen, "cannot make the task's mounts private: %s", strerror(errno));
	} else if (copy_mounts(resp, trees, err, errlen) == 0 &&
		   squash_step_bind_mounts(resp, trees, err, errlen) == 0) {
		rc = 0;
		/* Node-level mounts the namespace copied (other jobs' and squash-
		 * shell sessions'): not the task's to pin. */
		if (resp->mount_dir && resp->mount_dir[0] == '/' &&
		    detach_below(resp->mount_dir, err, errlen))
			rc = -1;
		else if (resp->sessions_dir && resp->sessions_dir[0] == '/' &&
			 detach_below(resp->sessions_dir, err, errlen))
			rc = -1;
	}
	for (size_t i = 0; i < resp->n_job_mounts; i++)
		if (trees[i] >= 0)
			close(trees[i]);
	free(trees);
	return rc;
}

/* Turns a non-OK answer into the reason the tasks print, naming the real
 * cause: the prolog could not reach squashd (its note says why), squashd
 * lost its registry (its answer says so), or the prolog never asked. */
static void explain(const struct squash_settings *s, uint32_t job_id, const char *host,
		    const Squash__Response *resp)
{
	const char *msg = resp->message && *resp->message ? resp->message
							  : "no reason given";
	char note[1024];

	switch (resp->status) {
	case SQUASH__STATUS__USER_ERROR:
		squash_step_fail("squash: job %u: %s", job_id, msg);
		break;
	case SQUASH__STATUS__NOT_FOUND:
		if (prolog_note_read(s, job_id, note, sizeof note) == 0)
			squash_step_fail("squash: job %u: node %s has no images for this job: %s",
				   job_id, host, note);
		else if (strstr(msg, "lost its registry"))
			squash_step_fail("squash: job %u: node %s: %s", job_id, host, msg);
		else
			/* A cluster whose prolog does not run at allocation, or an
			 * srun --jobid joining the allocation from outside it (then
			 * srun cannot tell its own images from the job's). */
			squash_step_fail("squash: job %u: node %s has no images for this job (%s): "
				   "the job prolog did not ask for them. The job's images are "
				   "mounted when the job is allocated, which needs "
				   "PrologFlags=Alloc in slurm.conf; an srun adds images of its "
				   "own only when it runs inside the allocation (not with "
				   "--jobid from outside it)",
				   job_id, host, msg);
		break;
	default:
		squash_step_fail("squash: job %u: squashd on node %s answered %s: %s",
			   job_id, host, squash_status_name(resp->status), msg);
		break;
	}
}

int squash_step_setup(spank_t sp, const char *option,
		      const struct squash_settings *s)
{
	struct squash_client_options opts = squash_settings_client(s);
	Squash__StepInfoRequest info = SQUASH__STEP_INFO_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp = NULL;
	char host[256] = "?", why[768];
	pid_t squashd_pid = 0;
	uint32_t job_id;
	uid_t uid;

	opts.peer_pid = &squashd_pid;
	if (!option)
		return 0; /* jobs without --squash-image never contact squashd */
	if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
		squash_step_fail("squash: cannot tell this step's job; the job cannot use --squash-image");
		return 0;
	}
	gethostname(host, sizeof host - 1);

	info.job_id = job_id;
	/* srun --squash-image inside an allocation: the step's own images. */
	if (squash_step_images_mount(sp, s, job_id, uid, &info, why, sizeof why) != 0) {
		squash_step_fail("squash: job %u: node %s: %s", job_id, host, why);
		return 0;
	}
	req.op_case = SQUASH__REQUEST__OP_STEP_INFO;
	req.step_info = &info;
	if (squash_client_call_retry(&opts, &req, &resp, NULL, why, sizeof why) != 0) {
		squash_step_fail("squash: job %u: squashd on node %s is not reachable: %s (job cannot use --squash-image)",
			   job_id, host, why);
		return 0;
	}
	if (resp->status == SQUASH__STATUS__NOT_FOUND &&
	    squash_job_mount_late(sp, s, job_id, (uint32_t)uid) >= 0) {
		/* squashd now has the job's record (its mounts, or why they
		 * failed), as after a prolog: ask again. */
		squash__response__free_unpacked(resp, NULL);
		resp = NULL;
		if (squash_client_call_retry(&opts, &req, &resp, NULL, why, sizeof why) != 0) {
			squash_step_fail("squash: job %u: squashd on node %s is not reachable: %s "
				   "(job cannot use --squash-image)", job_id, host, why);
			return 0;
		}
	}
	if (resp->status != SQUASH__STATUS__OK)
		explain(s, job_id, host, resp);
	else if (resp->has_job_uid && resp->job_uid != (uint32_t)uid)
		/* A stale record under a reused job id must not be handed over. */
		squash_step_fail("squash: job %u: squashd on node %s holds images of uid %u for this job id, not of uid %u",
			   job_id, host, resp->job_uid, (unsigned)uid);
	else {
		prepare(sp, job_id, resp, squashd_pid);
		if (step_mounts == resp)
			resp = NULL; /* kept for the tasks */
	}
	if (resp)
		squash__response__free_unpacked(resp, NULL);
	return 0; /* the tasks report failures; see squash_step_task_init */
}

int squash_step_task_privileged(spank_t sp)
{
	char why[1024];

	if (step_mounts && !step_error && attach(step_mounts, why, sizeof why) != 0)
		squash_step_fail("squash: job %u: %s", step_job_id, why);
	if (source_ns >= 0)
		close(source_ns); /* the task keeps no handle on the node's namespace */
	source_ns = -1;
	return 0; /* squash_step_task_init reports it, as the user */
}

int squash_step_task_init(spank_t sp)
{
	int local_id = 0;

	if (!step_error)
		return 0;
	/* One copy of the reason per node is enough; every task fails. */
	if (spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS || local_id == 0)
		fprintf(stderr, "%s\n", step_error);
	return -1;
}

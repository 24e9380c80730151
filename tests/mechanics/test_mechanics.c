/* Root-only tests of squashd's mount mechanics against the real kernel:
 * opening images as another user, FUSE and loop mounts, teardown, and the
 * failure paths (nothing may be left mounted, running or attached).
 * Skipped (exit 77) without root, /dev/fuse, /dev/loop-control or the
 * squashfs tools. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "process/identity.h"
#include "mount/image_open.h"
#include "util/log.h"
#include "mount/mount_fuse.h"
#include "mount/mount_loop.h"
#include "mount/mount_users.h"
#include "mount/reader_pool.h"
#include "mount/unmount.h"
#include "process/child_process.h"
#include "process/reader_process.h"

#define SKIP 77
#define TIMEOUT_MS 5000
#define NOBODY 65534
/* A budget is checked to bound a wait that would otherwise never end (a
 * busy mount, a server that never answers), not to time it: the slack
 * covers a loaded 2-core machine under ASan, where the 400 ms once
 * allowed past the unmount's budget was thin. */
#define SLACK_MS 2500

static char tmpdir[256];
static int failures, checks;

/* Everything the cleanup must undo if a check aborts the run. */
#define MAX_TRACKED 16
static char mounts[MAX_TRACKED][512];
static pid_t servers[MAX_TRACKED];

static void check(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (!ok)
		failures++;
	printf("%s %d - ", ok ? "ok" : "not ok", checks);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* A failed requirement makes the rest meaningless: exit (cleanup runs). */
#define REQUIRE(cond, ...)                                                   \
	do {                                                                 \
		bool ok_ = (cond);                                           \
		check(ok_, __VA_ARGS__);                                     \
		if (!ok_)                                                    \
			exit(1);                                             \
	} while (0)

static void track_mount(const char *path)
{
	for (int i = 0; i < MAX_TRACKED; i++)
		if (mounts[i][0] == '\0') {
			snprintf(mounts[i], sizeof(mounts[i]), "%s", path);
			return;
		}
}

static void track_server(pid_t pid)
{
	for (int i = 0; i < MAX_TRACKED; i++)
		if (servers[i] == 0) {
			servers[i] = pid;
			return;
		}
}

static void untrack_server(pid_t pid)
{
	for (int i = 0; i < MAX_TRACKED; i++)
		if (servers[i] == pid)
			servers[i] = 0;
}

static void cleanup(void)
{
	char cmd[512];

	for (int i = 0; i < MAX_TRACKED; i++)
		while (mounts[i][0] != '\0' && is_mount_point(mounts[i]) &&
		       umount2(mounts[i], MNT_DETACH) == 0)
			;
	for (int i = 0; i < MAX_TRACKED; i++)
		if (servers[i] > 0) {
			kill(servers[i], SIGKILL);
			waitpid(servers[i], NULL, 0);
		}
	if (tmpdir[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "cleanup: could not remove %s\n", tmpdir);
	}
}

static void path_in_tmp(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	REQUIRE(fd >= 0, "create %s", path);
	REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text),
		"write %s", path);
	close(fd);
	chmod(path, mode);
}

static bool file_has(const char *path, const char *want)
{
	char buf[256];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, want) != NULL;
}

/* Finds path in mountinfo; copies the per-mount options, the fs type and
 * the super options. Returns false when not mounted. */
static bool mountinfo_of(const char *path, char *opts, char *fstype,
			 char *super, size_t len)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		char mnt[1024], o[1000], *sep = strstr(line, " - ");
		char t[256], so[1000];

		if (sep == NULL ||
		    sscanf(line, "%*s %*s %*s %*s %1023s %999s", mnt, o) != 2 ||
		    sscanf(sep + 3, "%255s %*s %999s", t, so) != 2)
			continue;
		if (strcmp(mnt, path) != 0)
			continue;
		found = true;
		snprintf(opts, len, ",%s,", o);
		snprintf(fstype, len, "%s", t);
		snprintf(super, len, ",%s,", so);
	}
	fclose(f);
	return found;
}

static bool has_opt(const char *list, const char *opt)
{
	char want[128];

	snprintf(want, sizeof(want), ",%s,", opt);
	return strstr(list, want) != NULL;
}

/* Finds the loop device backed by file, if any. */
static bool loop_backed_by(const char *file, char *dev, size_t len)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	bool found = false;

	if (d == NULL)
		return false;
	while (!found && (e = readdir(d)) != NULL) {
		char p[512], back[1024] = "";
		FILE *f;

		if (strncmp(e->d_name, "loop", 4) != 0)
			continue;
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file",
			 e->d_name);
		f = fopen(p, "re");
		if (f == NULL)
			continue;
		if (fgets(back, sizeof(back), f) != NULL) {
			back[strcspn(back, "\n")] = '\0';
			if (strcmp(back, file) == 0) {
				found = true;
				snprintf(dev, len, "/dev/%s", e->d_name);
			}
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

/* True once no loop device is backed by file (autoclear may finish just
 * after the last close, so poll up to wait_ms). */
static bool loop_released(const char *file, int wait_ms)
{
	char dev[300];

	for (int waited = 0; loop_backed_by(file, dev, sizeof(dev));
	     waited += 20) {
		if (waited >= wait_ms)
			return false;
		usleep(20000);
	}
	return true;
}

static bool process_gone(pid_t pid)
{
	return kill(pid, 0) < 0 && errno == ESRCH;
}

/* Children of this process still running or unreaped (servers, probes). */
static int count_children_now(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char want[64];
	int n = 0;

	if (d == NULL)
		return -1;
	snprintf(want, sizeof(want), "PPid:\t%d\n", (int)getpid());
	while ((e = readdir(d)) != NULL) {
		char p[300];

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/status", e->d_name);
		FILE *f = fopen(p, "re");
		char line[256];

		if (f == NULL)
			continue;
		while (fgets(line, sizeof(line), f) != NULL)
			if (strcmp(line, want) == 0)
				n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* Children given up on are reaped by squashd's watcher thread as they exit;
 * give it a moment before counting what is left. */
static int count_children(void)
{
	int n = count_children_now();

	for (int i = 0; i < 200 && n > 0; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		n = count_children_now();
	}
	return n;
}

static bool status_uid_is(pid_t pid, unsigned uid)
{
	char p[64], want[128];

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	snprintf(want, sizeof(want), "Uid:\t%u\t%u\t%u\t%u", uid, uid, uid, uid);
	FILE *f = fopen(p, "re");
	char line[256];
	bool ok = false;

	if (f == NULL)
		return false;
	while (!ok && fgets(line, sizeof(line), f) != NULL)
		ok = strncmp(line, want, strlen(want)) == 0;
	fclose(f);
	return ok;
}

static bool have_tools(void)
{
	if (geteuid() != 0) {
		printf("# skipped: needs root\n");
		return false;
	}
	if (access("/dev/fuse", R_OK | W_OK) != 0 ||
	    access("/dev/loop-control", R_OK | W_OK) != 0) {
		printf("# skipped: needs /dev/fuse and /dev/loop-control\n");
		return false;
	}
	if (access(SQUASHFUSE_LL_PATH, X_OK) != 0 ||
	    system("mksquashfs -version >/dev/null 2>&1") != 0) {
		printf("# skipped: needs %s and mksquashfs\n", SQUASHFUSE_LL_PATH);
		return false;
	}
	return true;
}

/* ---- fixtures ---------------------------------------------------------- */

static char img[512], secret[512], corrupt[512], notsq[512];

static void make_fixtures(void)
{
	char src[512], p[600];

	if (mkdtemp(tmpdir) == NULL) {
		tmpdir[0] = '\0'; /* nothing for cleanup to remove */
		REQUIRE(false, "mkdtemp: %s", strerror(errno));
	}
	chmod(tmpdir, 0755); /* nobody must reach the readable files */
	path_in_tmp(src, sizeof(src), "src");
	REQUIRE(mkdir(src, 0755) == 0, "mkdir src");
	snprintf(p, sizeof(p), "%s/hello.txt", src);
	write_file(p, "hello squash\n", 0644);
	snprintf(p, sizeof(p), "%s/sub", src);
	REQUIRE(mkdir(p, 0755) == 0, "mkdir sub");
	snprintf(p, sizeof(p), "%s/sub/deep.txt", src);
	write_file(p, "deep file\n", 0644);

	path_in_tmp(img, sizeof(img), "img.sqfs");
	REQUIRE(run("mksquashfs '%s' '%s' -quiet -no-progress -noappend >/dev/null",
		    src, img) == 0, "mksquashfs builds img.sqfs");
	chmod(img, 0644);

	path_in_tmp(secret, sizeof(secret), "secret.sqfs");
	REQUIRE(run("cp '%s' '%s'", img, secret) == 0, "copy secret.sqfs");
	chmod(secret, 0600);

	/* Superblock intact (so it passes a superblock check), every table
	 * after it overwritten. */
	path_in_tmp(corrupt, sizeof(corrupt), "corrupt.sqfs");
	REQUIRE(run("cp '%s' '%s' && size=$(stat -c %%s '%s') && "
		    "head -c $((size - 96)) /dev/zero | tr '\\0' '\\377' | "
		    "dd of='%s' bs=1 seek=96 conv=notrunc status=none",
		    img, corrupt, corrupt, corrupt) == 0,
		"build corrupt.sqfs");
	chmod(corrupt, 0644);

	path_in_tmp(notsq, sizeof(notsq), "not-squashfs.bin");
	REQUIRE(run("head -c 65536 /dev/urandom > '%s'", notsq) == 0,
		"build not-squashfs.bin");
	chmod(notsq, 0644);

	path_in_tmp(p, sizeof(p), "adir");
	REQUIRE(mkdir(p, 0755) == 0, "mkdir adir");
	path_in_tmp(p, sizeof(p), "afifo");
	REQUIRE(mkfifo(p, 0644) == 0, "mkfifo afifo");
	path_in_tmp(p, sizeof(p), "alink");
	REQUIRE(symlink(img, p) == 0, "symlink alink");
}

static void make_mountpoint(char *buf, size_t len, const char *name)
{
	path_in_tmp(buf, len, name);
	REQUIRE(mkdir(buf, 0700) == 0, "mkdir %s", name);
	track_mount(buf);
}

/* ---- tests ------------------------------------------------------------- */

static void expect_open_error(const char *name, const struct identity *id,
			      enum result want, const char *text)
{
	char path[512], err[512] = "";
	struct stat st;
	int fd = -1;
	enum result r;

	if (name[0] == '/')
		snprintf(path, sizeof(path), "%s", name);
	else
		path_in_tmp(path, sizeof(path), name);
	r = image_open_as_user(path, id, TIMEOUT_MS, &fd, &st, NULL, err,
			       sizeof(err));
	check(r == want && fd == -1 && strstr(err, text) != NULL &&
		      strstr(err, path) != NULL,
	      "open %s as %s refused (%d): %s", name, id->name, (int)r, err);
	if (fd >= 0)
		close(fd);
}

static void test_open(const struct identity *nobody, const struct identity *root)
{
	char err[512] = "";
	struct stat st, want;
	int fd = -1;
	enum result r;

	r = image_open_as_user(img, nobody, TIMEOUT_MS, &fd, &st, NULL, err,
			       sizeof(err));
	REQUIRE(r == RESULT_OK && fd >= 0, "open readable image as nobody: %s",
		err);
	REQUIRE(stat(img, &want) == 0, "stat image");
	check(st.st_ino == want.st_ino && st.st_dev == want.st_dev &&
		      st.st_size == want.st_size,
	      "returned stat describes the image");
	check((fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY &&
		      (fcntl(fd, F_GETFD) & FD_CLOEXEC),
	      "descriptor is O_RDONLY and close-on-exec");
	close(fd);

	expect_open_error("secret.sqfs", nobody, RESULT_USER_ERROR,
			  "not readable by user nobody (uid 65534): Permission denied");
	expect_open_error("adir", nobody, RESULT_USER_ERROR, "is a directory");
	expect_open_error("afifo", nobody, RESULT_USER_ERROR, "is a FIFO");
	expect_open_error("alink", nobody, RESULT_USER_ERROR,
			  "is a symbolic link");
	expect_open_error("missing.sqfs", nobody, RESULT_USER_ERROR,
			  "No such file or directory");
	expect_open_error("img.sqfs/x", nobody, RESULT_USER_ERROR,
			  "Not a directory");
	expect_open_error("/dev/null", nobody, RESULT_USER_ERROR, "is a device");

	fd = -1;
	r = image_open_as_user(secret, root, TIMEOUT_MS, &fd, &st, NULL, err,
			       sizeof(err));
	check(r == RESULT_OK && fd >= 0, "root may open its 0600 image: %s",
	      r == RESULT_OK ? "ok" : err);
	if (fd >= 0)
		close(fd);
	check(count_children() == 0, "no opener process left behind");
}

/* A FUSE mount nobody serves stands in for a hung network file system:
 * opening an image on it must time out, not hang squashd. */
static void test_open_hung_fs(const struct identity *nobody)
{
	char mnt[512], path[600], opts[128], err[512] = "";
	struct stat st;
	struct timespec t0, t1;
	int fuse_fd, fd = -1;
	enum result r;

	make_mountpoint(mnt, sizeof(mnt), "mnt-hung");
	fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	REQUIRE(fuse_fd >= 0, "open /dev/fuse");
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other",
		 fuse_fd);
	if (mount("hung", mnt, "fuse.hung", MS_RDONLY | MS_NOSUID | MS_NODEV,
		  opts) < 0) {
		close(fuse_fd);
		REQUIRE(false, "mount unserved FUSE: %s", strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/img.sqfs", mnt);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = image_open_as_user(path, nobody, 500, &fd, &st, NULL, err, sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
		  (t1.tv_nsec - t0.tv_nsec) / 1000000;
	check(r == RESULT_NODE_ERROR && fd == -1 &&
		      strstr(err, "timed out") != NULL,
	      "open on a hung file system times out: %s", err);
	check(ms < 500 + SLACK_MS, "open timeout bounded (%ld ms for 500 ms budget)", ms);
	check(count_children() == 0, "stuck opener killed and reaped");
	if (fd >= 0)
		close(fd);
	umount2(mnt, MNT_DETACH);
	close(fuse_fd); /* aborts the connection */
}

static int open_or_die(const char *path, const struct identity *id)
{
	char err[512] = "";
	struct stat st;
	int fd = -1;

	REQUIRE(image_open_as_user(path, id, TIMEOUT_MS, &fd, &st, NULL, err,
				   sizeof(err)) == RESULT_OK,
		"open %s as %s: %s", path, id->name, err);
	return fd;
}

/* reader_process_kind tells squashd's FUSE servers by uid, executable
 * and start time, not by name: a copy of another binary named
 * squash-reader, running as the same user, is none. */
static void test_reader_identity(pid_t server, int server_pidfd)
{
	char fake[512], cmd[1200], why[256] = "";
	int status, pidfd;

	check(reader_process_kind(server_pidfd, server, NOBODY, false, why, sizeof(why)) ==
		      READER_SQUASHFUSE, "the FUSE server is squashfuse_ll for uid 65534 (%s)", why);
	check(reader_process_kind(server_pidfd, server, 0, false, why, sizeof(why)) == READER_NONE,
	      "not for uid 0: %s", why);
	/* Started after "squashd" (this test) did: never adopted. */
	check(reader_process_kind(server_pidfd, server, NOBODY, true, why, sizeof(why)) ==
		      READER_NONE && strstr(why, "started after"), "not adoptable: %s", why);

	path_in_tmp(fake, sizeof(fake), "squash-reader");
	snprintf(cmd, sizeof(cmd), "install -m 0755 /bin/sleep '%s'", fake);
	REQUIRE(system(cmd) == 0, "copy /bin/sleep");
	pid_t pid = fork();
	REQUIRE(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (setgid(NOBODY) == 0 && setuid(NOBODY) == 0)
			execl(fake, "squash-reader", "30", (char *)NULL);
		_exit(127);
	}
	track_server(pid);
	pidfd = child_pidfd(pid);
	for (int i = 0; i < 200; i++) { /* until it runs the copy */
		char comm[64] = "", path[64];
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		FILE *f = fopen(path, "re");
		if (f && fgets(comm, sizeof(comm), f) && !strncmp(comm, "squash-reader", 13)) {
			fclose(f);
			break;
		}
		if (f)
			fclose(f);
		usleep(10000);
	}
	check(reader_process_kind(pidfd, pid, NOBODY, false, why, sizeof(why)) == READER_NONE,
	      "a process of the user's named squash-reader is no reader: %s", why);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	check(reader_process_kind(pidfd, pid, NOBODY, false, why, sizeof(why)) == READER_NONE,
	      "an ended process is none: %s", why);
	close(pidfd);
	untrack_server(pid);
	unlink(fake);
}

static void test_fuse(const struct identity *nobody)
{
	char mnt[512], p[600], opts[1024], type[1024], super[1024];
	char err[512] = "";
	pid_t server = 0;
	int server_pidfd = -1;
	int fd = open_or_die(img, nobody);
	enum result r;

	make_mountpoint(mnt, sizeof(mnt), "mnt-fuse");
	r = fuse_mount_image(fd, mnt, nobody, SQUASHFUSE_LL_PATH, TIMEOUT_MS,
			     &server, &server_pidfd, err, sizeof(err));
	close(fd); /* the server holds its own copy */
	if (server > 0)
		track_server(server);
	REQUIRE(r == RESULT_OK && server > 0, "FUSE mount as nobody: %s",
		r == RESULT_OK ? "ok" : err);

	snprintf(p, sizeof(p), "%s/hello.txt", mnt);
	check(file_has(p, "hello squash"), "read hello.txt through FUSE");
	snprintf(p, sizeof(p), "%s/sub/deep.txt", mnt);
	check(file_has(p, "deep file"), "read sub/deep.txt through FUSE");
	check(status_uid_is(server, NOBODY), "server %d runs as uid 65534",
	      (int)server);
	check(getsid(server) == server, "server runs in its own session");
	check(is_mount_point(mnt) == 1, "is_mount_point sees the FUSE mount");
	{
		/* Its server stopped (as its user may): still told, without
		 * asking it. */
		int st = -1;
		pid_t c;

		kill(server, SIGSTOP);
		c = fork();
		if (c == 0) {
			alarm(5);
			_exit(is_mount_point(mnt) == 1 ? 0 : 1);
		}
		if (c > 0)
			waitpid(c, &st, 0);
		kill(server, SIGCONT);
		check(c > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "is_mount_point answers with the FUSE server stopped");
	}
	REQUIRE(mountinfo_of(mnt, opts, type, super, sizeof(opts)),
		"FUSE mount in mountinfo");
	check(has_opt(opts, "ro") && has_opt(opts, "nosuid") &&
		      has_opt(opts, "nodev"),
	      "FUSE mount options ro,nosuid,nodev: %s", opts);
	check(strcmp(type, "fuse.squashfuse") == 0, "fs type %s", type);
	check(has_opt(super, "allow_other") &&
		      has_opt(super, "default_permissions") &&
		      has_opt(super, "user_id=65534"),
	      "FUSE super options: %s", super);

	test_reader_identity(server, server_pidfd);
	r = unmount_image(mnt, server, server_pidfd, NOBODY, -1, TIMEOUT_MS, err, sizeof(err));
	check(r == RESULT_OK, "unmount FUSE: %s", r == RESULT_OK ? "ok" : err);
	untrack_server(server);
	check(!is_mount_point(mnt) && !mountinfo_of(mnt, opts, type, super,
						    sizeof(opts)),
	      "FUSE mount gone from mountinfo");
	check(process_gone(server), "server exited and was reaped");
	check(access(mnt, F_OK) != 0 && errno == ENOENT,
	      "mount point removed");
	r = unmount_image(mnt, 0, -1, NOBODY, -1, TIMEOUT_MS, err, sizeof(err));
	check(r == RESULT_OK, "unmounting again is a no-op");
}

static void test_loop(const struct identity *root)
{
	char mnt[512], p[600], opts[1024], type[1024], super[1024];
	char dev[64] = "", seen[300];
	char err[512] = "";
	int fd = open_or_die(img, root);
	enum result r;

	/* A space in the path exercises mountinfo's octal escapes. */
	make_mountpoint(mnt, sizeof(mnt), "mnt loop");
	r = loop_mount_image(fd, mnt, dev, sizeof(dev), err, sizeof(err));
	close(fd);
	REQUIRE(r == RESULT_OK, "loop mount: %s", r == RESULT_OK ? dev : err);
	check(strncmp(dev, "/dev/loop", 9) == 0, "device name %s", dev);

	snprintf(p, sizeof(p), "%s/hello.txt", mnt);
	check(file_has(p, "hello squash"), "read hello.txt through squashfs");
	check(is_mount_point(mnt) == 1, "is_mount_point decodes \\040");
	{
		/* Adoption's set, read once: the same answers, a trailing
		 * slash ignored, the parent directory not a mount point. */
		struct mount_points mp;
		char slash[PATH_MAX + 2], parent[PATH_MAX];

		snprintf(slash, sizeof(slash), "%s/", mnt);
		snprintf(parent, sizeof(parent), "%s", mnt);
		*strrchr(parent, '/') = '\0';
		REQUIRE(mount_points_read(&mp) == 0, "mount_points_read");
		check(mount_points_has(&mp, mnt) == 1 && mount_points_has(&mp, slash) == 1,
		      "mount_points_has sees the loop mount (\\040 decoded)");
		check(mount_points_has(&mp, parent) == 0, "mount_points_has: its directory is not one");
		mount_points_free(&mp);
	}
	check(loop_backed_by(img, seen, sizeof(seen)) &&
		      strcmp(seen, dev) == 0,
	      "%s is backed by the image", dev);
	snprintf(p, sizeof(p), "/sys/block/%s/ro", dev + 5);
	check(file_has(p, "1"), "%s is read-only", dev);
	snprintf(p, sizeof(p), "/sys/block/%s/loop/autoclear", dev + 5);
	check(file_has(p, "1"), "%s has autoclear", dev);

	/* mountinfo escapes the space; compare against the escaped form. */
	char esc[600];
	snprintf(esc, sizeof(esc), "%s/mnt\\040loop", tmpdir);
	REQUIRE(mountinfo_of(esc, opts, type, super, sizeof(opts)),
		"escaped loop mount in mountinfo");
	check(strcmp(type, "squashfs") == 0, "fs type %s", type);
	check(has_opt(opts, "ro") && has_opt(opts, "nosuid") &&
		      has_opt(opts, "nodev"),
	      "loop mount options ro,nosuid,nodev: %s", opts);

	r = unmount_image(mnt, 0, -1, NOBODY, -1, TIMEOUT_MS, err, sizeof(err));
	check(r == RESULT_OK, "unmount loop: %s", r == RESULT_OK ? "ok" : err);
	check(!is_mount_point(mnt), "loop mount gone");
	check(loop_released(img, 2000),
	      "autoclear released the loop device");
}

static void test_busy_unmount(const struct identity *root)
{
	char mnt[512], p[600], dev[64] = "", err[512] = "";
	struct timespec t0, t1;
	int fd = open_or_die(img, root), busy;
	enum result r;

	make_mountpoint(mnt, sizeof(mnt), "mnt-busy");
	r = loop_mount_image(fd, mnt, dev, sizeof(dev), err, sizeof(err));
	close(fd);
	REQUIRE(r == RESULT_OK, "loop mount for busy test: %s", err);
	snprintf(p, sizeof(p), "%s/hello.txt", mnt);
	busy = open(p, O_RDONLY | O_CLOEXEC);
	REQUIRE(busy >= 0, "hold a file open in the mount");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = unmount_image(mnt, 0, -1, NOBODY, -1, 600, err, sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
		  (t1.tv_nsec - t0.tv_nsec) / 1000000;
	check(r == RESULT_OK && !is_mount_point(mnt),
	      "busy mount detached lazily: %s", r == RESULT_OK ? "ok" : err);
	check(ms < 600 + SLACK_MS, "busy unmount bounded (%ld ms for 600 ms budget)", ms);
	close(busy);
	check(loop_released(img, 2000),
	      "loop device released after the last user closed");
}

static void test_fuse_corrupt(const struct identity *nobody)
{
	char mnt[512], err[512] = "";
	pid_t server = 0;
	int server_pidfd = -1;
	int fd = open_or_die(corrupt, nobody);
	enum result r;

	make_mountpoint(mnt, sizeof(mnt), "mnt-corrupt");
	r = fuse_mount_image(fd, mnt, nobody, SQUASHFUSE_LL_PATH, TIMEOUT_MS,
			     &server, &server_pidfd, err, sizeof(err));
	close(fd);
	if (server > 0)
		track_server(server);
	check(r == RESULT_USER_ERROR && server == 0,
	      "corrupt image refused as user error (%d): %s", (int)r, err);
	check(!is_mount_point(mnt), "no FUSE mount left");
	check(count_children() == 0, "no server or probe left");
	check(loop_released(corrupt, 0),
	      "no loop device for the corrupt image");

	/* Not squashfs at all: squashfuse_ll exits before serving. */
	fd = open_or_die(notsq, nobody);
	r = fuse_mount_image(fd, mnt, nobody, SQUASHFUSE_LL_PATH, TIMEOUT_MS,
			     &server, &server_pidfd, err, sizeof(err));
	close(fd);
	if (server > 0)
		track_server(server);
	check(r == RESULT_USER_ERROR && server == 0 &&
		      strstr(err, "exit status") != NULL,
	      "non-squashfs file refused by FUSE as user error (%d): %s",
	      (int)r, err);
	check(!is_mount_point(mnt), "no FUSE mount left");
	check(count_children() == 0, "failed server reaped");
}

static void test_fuse_failures(const struct identity *nobody)
{
	char mnt[512], script[512], err[512] = "";
	pid_t server = 0;
	int server_pidfd = -1;
	int fd;
	enum result r;
	struct timespec t0, t1;

	/* A server that never answers: the mount must time out cleanly. */
	path_in_tmp(script, sizeof(script), "hang.sh");
	write_file(script, "#!/bin/sh\nexec sleep 60\n", 0755);
	make_mountpoint(mnt, sizeof(mnt), "mnt-hang");
	fd = open_or_die(img, nobody);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = fuse_mount_image(fd, mnt, nobody, script, 800, &server, &server_pidfd, err,
			     sizeof(err));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (server > 0)
		track_server(server);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
		  (t1.tv_nsec - t0.tv_nsec) / 1000000;
	check(r == RESULT_NODE_ERROR && server == 0,
	      "silent server times out as node error: %s", err);
	check(ms < 800 + SLACK_MS, "timeout bounded (%ld ms for 800 ms budget)", ms);
	check(!is_mount_point(mnt), "no mount left after timeout");
	check(count_children() == 0, "hung server killed and reaped");

	/* A server binary that does not exist. */
	r = fuse_mount_image(fd, mnt, nobody, "/nonexistent/squashfuse_ll",
			     TIMEOUT_MS, &server, &server_pidfd, err, sizeof(err));
	if (server > 0)
		track_server(server);
	check(r == RESULT_NODE_ERROR && strstr(err, "cannot run") != NULL,
	      "missing server binary is a node error: %s", err);
	check(!is_mount_point(mnt), "no mount left after exec failure");
	check(count_children() == 0, "failed server reaped");
	close(fd);
}

/* One squash-reader for all of a user's mounts (mount/reader_pool.c): two
 * mounts share the process, it outlives the first and exits after the
 * last; an image it cannot read, a reader that answers garbage and one
 * that never answers fail the mount without leaving a process or mount. */
static void pooled_mount(const char *image, const char *mnt, const char *reader,
			 const struct identity *id, int timeout_ms, pid_t *server, int *pidfd,
			 enum result *r, char *err, size_t errlen)
{
	int fd = open_or_die(image, id);

	*r = fuse_mount_image_kept(fd, mnt, id, reader, true, timeout_ms, server, pidfd, NULL, err,
				   errlen);
	close(fd);
	if (*server > 0)
		track_server(*server);
}

static void test_reader_pool(const struct identity *nobody)
{
	char reader[512], fake[512], m1[512], m2[512], p[600], err[512] = "", cmd[1200];
	pid_t s1 = 0, s2 = 0, s3 = 0;
	int fd1 = -1, fd2 = -1, fd3 = -1;
	enum result r;

	/* A copy nobody can run whatever the build directory's modes. */
	path_in_tmp(reader, sizeof(reader), "squash-reader");
	snprintf(cmd, sizeof(cmd), "install -m 0755 '%s' '%s'", SQUASH_READER_BUILT, reader);
	REQUIRE(system(cmd) == 0, "copy %s", SQUASH_READER_BUILT);
	reader_process_init(reader, SQUASHFUSE_LL_PATH); /* the reader squashd would start */
	make_mountpoint(m1, sizeof(m1), "mnt-pool-1");
	make_mountpoint(m2, sizeof(m2), "mnt-pool-2");

	pooled_mount(img, m1, reader, nobody, TIMEOUT_MS, &s1, &fd1, &r, err, sizeof(err));
	REQUIRE(r == RESULT_OK && s1 > 0, "first pooled mount: %s", r == RESULT_OK ? "ok" : err);
	pooled_mount(img, m2, reader, nobody, TIMEOUT_MS, &s2, &fd2, &r, err, sizeof(err));
	REQUIRE(r == RESULT_OK && s2 > 0, "second pooled mount: %s", r == RESULT_OK ? "ok" : err);
	check(s1 == s2, "one reader serves both mounts (%d, %d)", (int)s1, (int)s2);
	check(status_uid_is(s1, NOBODY), "the reader runs as uid 65534");
	check(reader_pool_count() == 1, "one reader process");
	snprintf(p, sizeof(p), "%s/hello.txt", m1);
	check(file_has(p, "hello squash"), "read through the first pooled mount");
	snprintf(p, sizeof(p), "%s/sub/deep.txt", m2);
	check(file_has(p, "deep file"), "read through the second pooled mount");

	/* Another user's teardown naming that pid (a dead reader of theirs
	 * whose pid this reader got) neither takes a mount of it nor stops it. */
	check(reader_pool_put(s1, NOBODY + 1), "another uid's put finds no pool of its own (not a pooled reader)");
	check(!reader_pool_put(s1, NOBODY), "the reader is not stopped with its first mount");
	r = unmount_image(m1, 0, -1, NOBODY, -1, TIMEOUT_MS, err, sizeof(err));
	check(r == RESULT_OK, "unmount the first: %s", r == RESULT_OK ? "ok" : err);
	close(fd1);
	check(file_has(p, "deep file"), "the second mount still reads");
	check(!process_gone(s1), "the reader still runs");

	check(reader_pool_put(s2, NOBODY), "the last mount's put says stop the reader");
	r = unmount_image(m2, s2, fd2, NOBODY, -1, TIMEOUT_MS, err, sizeof(err));
	check(r == RESULT_OK, "unmount the second: %s", r == RESULT_OK ? "ok" : err);
	close(fd2);
	untrack_server(s1);
	check(process_gone(s1), "the reader exited after its last mount and was reaped");
	check(reader_pool_count() == 0, "no reader left in the pool");

	/* Not a squashfs image: the reader says why; it served nothing, so it goes. */
	make_mountpoint(m1, sizeof(m1), "mnt-pool-bad");
	pooled_mount(notsq, m1, reader, nobody, TIMEOUT_MS, &s3, &fd3, &r, err, sizeof(err));
	check(r == RESULT_USER_ERROR && s3 == 0 && strstr(err, "squash-reader could not read the image"),
	      "unreadable image is a user error with the reader's reason: %s", err);
	check(!is_mount_point(m1), "no mount left after the reader's refusal");
	check(count_children() == 0, "the unused reader was stopped and reaped");
	check(reader_pool_count() == 0, "and forgotten");

	/* A reader (the user can ptrace theirs) that answers garbage. */
	path_in_tmp(fake, sizeof(fake), "garbage-reader.sh");
	write_file(fake, "#!/bin/sh\nprintf 'not an answer' >&3\nexec sleep 60\n", 0755);
	pooled_mount(img, m1, fake, nobody, TIMEOUT_MS, &s3, &fd3, &r, err, sizeof(err));
	check(r == RESULT_NODE_ERROR && s3 == 0 && strstr(err, "malformed"),
	      "a garbage answer fails the mount: %s", err);
	check(!is_mount_point(m1), "no mount left after a garbage answer");
	check(count_children() == 0, "the garbage reader was killed and reaped");

	/* One that never answers: bounded by the request's time. */
	path_in_tmp(fake, sizeof(fake), "silent-reader.sh");
	write_file(fake, "#!/bin/sh\nexec sleep 60\n", 0755);
	pooled_mount(img, m1, fake, nobody, 800, &s3, &fd3, &r, err, sizeof(err));
	check(r == RESULT_NODE_ERROR && s3 == 0 && strstr(err, "did not answer"),
	      "a silent reader fails the mount in time: %s", err);
	check(!is_mount_point(m1), "no mount left after a silent reader");
	check(count_children() == 0, "the silent reader was killed and reaped");
	check(reader_pool_count() == 0, "no reader left in the pool");
}

static void test_loop_not_squashfs(const struct identity *root)
{
	char mnt[512], dev[64] = "", err[512] = "";
	int fd = open_or_die(notsq, root);
	enum result r;

	make_mountpoint(mnt, sizeof(mnt), "mnt-notsq");
	r = loop_mount_image(fd, mnt, dev, sizeof(dev), err, sizeof(err));
	close(fd);
	check(r == RESULT_USER_ERROR &&
		      strstr(err, "could not mount the image as squashfs"),
	      "non-squashfs file refused as user error (%d): %s", (int)r, err);
	check(!is_mount_point(mnt), "nothing mounted");
	check(loop_released(notsq, 2000),
	      "no loop device left for the non-squashfs file");
}

/* Identities are large (group arrays); keep them off the stack, and
 * global so an early exit leaves nothing unreachable. */
static struct identity *nobody, *root, *stranger;

static void free_identities(void)
{
	free(nobody);
	free(root);
	free(stranger);
}

/* A process of uid NOBODY in a mount namespace of its own whose mountinfo
 * is longer than the 4 MiB mount_users once read of one (1,200 mounts at
 * a path of nearly 4 KiB), with b bound after them all; its pid. */
static pid_t table_past_a_read(const char *b)
{
	char deep[4096], bound[600];
	int ready[2];
	size_t len;

	path_in_tmp(deep, sizeof(deep), "deep");
	path_in_tmp(bound, sizeof(bound), "mu-bound");
	REQUIRE(mkdir(deep, 0700) == 0 && mkdir(bound, 0700) == 0 && pipe(ready) == 0, "a deep directory");
	for (len = strlen(deep); len + 256 < 3900;) {
		deep[len++] = '/';
		memset(deep + len, 'd', 250);
		len += 250;
		deep[len] = '\0';
		REQUIRE(mkdir(deep, 0700) == 0, "a deep directory: %s", strerror(errno));
	}
	pid_t pid = fork();
	if (pid == 0) {
		char ok = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
		for (int i = 0; ok && i < 1200; i++)
			ok = mount("tmpfs", deep, "tmpfs", 0, "size=4k") == 0;
		ok = ok && mount(b, bound, NULL, MS_BIND, NULL) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0;
		(void)!write(ready[1], &ok, 1);
		pause();
		_exit(0);
	}
	char ok = 0;
	close(ready[1]);
	REQUIRE(pid > 0 && read(ready[0], &ok, 1) == 1 && ok, "a namespace with a mountinfo past 4 MiB");
	close(ready[0]);
	track_server(pid);
	return pid;
}

/* Who uses squashd's mounts from another namespace (mount/mount_users.c):
 * a process of the asked uid whose namespace binds the mount elsewhere
 * does; a copy at the mount's own path (the namespace was cloned after
 * the mount) does not; another uid's namespaces are never read; past the
 * uid's budget of mountinfo bytes the answer is "not known" (-1). */
static void test_mount_users(void)
{
	char a[512], b[512], c[512];
	int ready[2];

	make_mountpoint(a, sizeof(a), "mu-a");
	make_mountpoint(b, sizeof(b), "mu-b");
	path_in_tmp(c, sizeof(c), "mu-c");
	REQUIRE(mkdir(c, 0700) == 0 && mount("tmpfs", a, "tmpfs", 0, "size=1m") == 0 &&
		mount("tmpfs", b, "tmpfs", 0, "size=1m") == 0 && pipe(ready) == 0,
		"two tmpfs mounts for the mount users test");
	pid_t child = fork();
	if (child == 0) {
		/* Its own namespace, cloned after both mounts: b stays where it
		 * was, a is bound at c too (as a step binds an image). */
		char ok = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
			  mount(a, c, NULL, MS_BIND, NULL) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0 &&
			  /* Non-dumpable: its /proc files are root's, as any
			   * user can make them; its uids still say whose it is. */
			  prctl(PR_SET_DUMPABLE, 0) == 0;
		(void)!write(ready[1], &ok, 1);
		pause();
		_exit(0);
	}
	char ok = 0;
	close(ready[1]);
	REQUIRE(child > 0 && read(ready[0], &ok, 1) == 1 && ok, "a namespace of uid %d that binds a elsewhere", NOBODY);
	close(ready[0]);
	track_server(child);

	char *self = mount_users_read_file("/proc/self/mountinfo", 4 << 20);
	struct mount_use_query q[3] = { { .point = a, .uid = NOBODY }, { .point = b, .uid = NOBODY },
					{ .point = a, .uid = 4242 } };
	mount_users_identity(self, a, &q[0].id);
	mount_users_identity(self, b, &q[1].id);
	q[2].id = q[0].id;
	free(self);
	mount_users_find_all(q, 3, 0);
	check(q[0].user == child, "the uid's namespace binding the mount elsewhere uses it (%d, child %d)",
	      (int)q[0].user, (int)child);
	check(q[1].user == 0, "a copy at the mount's own path is no use (%d)", (int)q[1].user);
	check(q[2].user == 0, "another uid's namespace is not read for it (%d)", (int)q[2].user);
	mount_users_find_all(q, 3, 1);
	check(q[0].user == -1 && q[1].user == -1, "past its budget the uid's answers are not known (%d, %d)",
	      (int)q[0].user, (int)q[1].user);
	check(q[2].user == 0, "another uid's answer is not (%d)", (int)q[2].user);

	/* A namespace whose table is long (anyone can lengthen it with
	 * mounts of long paths that later namespaces copy, root's too), b
	 * bound at its end: read a line at a time to its end, b's use is
	 * found. A cut at 4 MiB made every query a root namespace could
	 * answer "not known", and gc kept every user's lost jobs. */
	pid_t longer = table_past_a_read(b);
	q[0].user = q[1].user = q[2].user = 0;
	mount_users_find_all(q, 3, 0);
	check(q[0].user == child, "a long table leaves what the other namespace answers (%d, child %d)",
	      (int)q[0].user, (int)child);
	check(q[1].user == longer, "a mount bound past 4 MiB of a table is found (%d, pid %d)",
	      (int)q[1].user, (int)longer);
	mount_users_find_all(q, 3, 2 << 20);
	check(q[1].user == -1, "past the uid's budget within a table its answer is not known (%d)",
	      (int)q[1].user);
	if (longer > 0) {
		kill(longer, SIGKILL);
		waitpid(longer, NULL, 0);
		untrack_server(longer);
	}

	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	untrack_server(child);
	check(umount2(a, 0) == 0 && umount2(b, 0) == 0, "the mount users test's mounts go");
}

int main(void)
{
	char err[512] = "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!have_tools())
		return SKIP;
	log_init(false);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/squash-mech.XXXXXX");
	atexit(free_identities);
	nobody = calloc(1, sizeof(*nobody));
	root = calloc(1, sizeof(*root));
	stranger = calloc(1, sizeof(*stranger));
	if (nobody == NULL || root == NULL || stranger == NULL)
		return 99;
	/* Registered before anything is created so it always runs. */
	atexit(cleanup);
	REQUIRE(identity_lookup(NOBODY, nobody, err, sizeof(err)) == RESULT_OK,
		"look up uid 65534: %s", err);
	REQUIRE(identity_lookup(0, root, err, sizeof(err)) == RESULT_OK,
		"look up uid 0: %s", err);
	check(identity_lookup(4000000000u, stranger, err, sizeof(err)) ==
			      RESULT_USER_ERROR &&
		      strstr(err, "not a known user") != NULL,
	      "unknown uid is a user error: %s", err);

	reader_process_init(SQUASH_READER_BUILT, SQUASHFUSE_LL_PATH);
	make_fixtures();
	test_open(nobody, root);
	test_open_hung_fs(nobody);
	test_fuse(nobody);
	test_loop(root);
	test_busy_unmount(root);
	test_fuse_corrupt(nobody);
	test_fuse_failures(nobody);
	test_reader_pool(nobody);
	test_loop_not_squashfs(root);
	test_mount_users();

	printf("# %d checks, %d failed\n", checks, failures);
	return failures == 0 ? 0 : 1;
}

/* gc's local evidence (daemon/local_steps.c): slurmstepd's process titles
 * of every Slurm release are read right, anything else is not taken for
 * one, and a scan finds the steps of one node (UTS namespace) only. */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slurm/local_steps.h"
#include "unit.h"

static bool title(const char *t, uint32_t *job, uint32_t *step)
{
	return local_steps_parse_title(t, strlen(t) + 1, job, step);
}

static void test_titles_of_every_release(void)
{
	uint32_t job = 0, step = 0;

	CHECK(title("slurmstepd: [1234.0]", &job, &step));
	CHECK_INT(job, 1234);
	CHECK_INT(step, 0);
	CHECK(title("slurmstepd: [77.batch]", &job, &step));
	CHECK_INT(job, 77);
	CHECK_INT(step, LOCAL_STEP_SPECIAL);
	CHECK(title("slurmstepd: [78.extern]", &job, &step) && job == 78);
	CHECK_INT(step, LOCAL_STEP_EXTERN);
	CHECK(title("slurmstepd: [79.interactive]", &job, &step) && job == 79);
	CHECK(title("slurmstepd: [80.12+1]", &job, &step) && job == 80 && step == 12);
	CHECK(title("slurmstepd: [81.3 stepmgr]", &job, &step) && job == 81 && step == 3);
	/* setproctitle pads with NULs or spaces after the title. */
	CHECK(local_steps_parse_title("slurmstepd: [82.4]\0\0\0", 21, &job, &step) && job == 82);
}

static void test_other_processes_are_not_steps(void)
{
	static const char *const others[] = {
		"slurmstepd", "slurmstepd: spank prolog", "slurmstepd: [ns_infinity:namespace]",
		"slurmstepd: [0.0]", "slurmstepd: [12]", "slurmstepd: [12.]", "slurmstepd: [12.x]",
		"slurmstepd: [99999999999.0]", "slurmstepd: [12.4294967295]",
		"slurmstepd: [12.4294967294]", "slurmstepd: [12.0",
		"/usr/sbin/slurmd", "bash -c slurmstepd: [1.0]", "",
	};
	uint32_t job, step;

	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		CHECK(!title(others[i], &job, &step));
	/* Not NUL-terminated within what was read. */
	CHECK(!local_steps_parse_title("slurmstepd: [12.", 16, &job, &step));
}

static char root[] = "/tmp/test_local_steps.XXXXXX";

/* A process in the fake /proc: its title, UTS namespace and real uid
 * (-1: no status file). */
/* A process of the fake /proc: its title, node, uids (uid, or no status
 * when negative), program (the exe link) and parent. */
static void fake_process_full(int pid, const char *cmdline, size_t len, const char *uts, int uid,
			      const char *exe, int ppid)
{
	char path[256];
	int fd;

	snprintf(path, sizeof path, "%s/%d", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/%d/ns", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/%d/ns/uts", root, pid);
	if (symlink(uts, path) != 0)
		perror(path);
	snprintf(path, sizeof path, "%s/%d/cmdline", root, pid);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, cmdline, len) != (ssize_t)len)
		perror(path);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof path, "%s/%d/exe", root, pid);
	if (symlink(exe, path) != 0)
		perror(path);
	if (uid < 0)
		return;
	snprintf(path, sizeof path, "%s/%d/status", root, pid);
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\n"
			  "PPid:\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t0\t0\t0\t0\n", pid, pid, ppid, uid, uid,
			  uid, uid) < 0)
		perror(path);
	if (f)
		fclose(f);
}

#define STEPD "/usr/sbin/slurmstepd"

static void fake_process_as(int pid, const char *cmdline, size_t len, const char *uts, int uid)
{
	fake_process_full(pid, cmdline, len, uts, uid, STEPD, 1);
}

static void fake_process(int pid, const char *cmdline, size_t len, const char *uts)
{
	fake_process_as(pid, cmdline, len, uts, 0);
}

static void test_scan_finds_one_nodes_steps(void)
{
	struct local_steps s;
	char cmd[256];

	if (!mkdtemp(root)) {
		perror("mkdtemp");
		unit_failures++;
		return;
	}
	fake_process(10, "slurmstepd: [5.batch]", 22, "uts:[111]");
	fake_process(11, "slurmstepd: [5.0]", 18, "uts:[111]");
	fake_process(15, "slurmstepd: [5.extern]", 23, "uts:[111]");
	fake_process(16, "slurmstepd: [7.batch]", 22, "uts:[111]");
	fake_process(12, "slurmstepd: [6.extern]", 23, "uts:[222]"); /* another node */
	static const char sleep_cmdline[] = { 's', 'l', 'e', 'e', 'p', 0, '1', '0', '0', 0 };

	fake_process(13, sleep_cmdline, sizeof sleep_cmdline, "uts:[111]");
	fake_process(14, "", 0, "uts:[111]"); /* a kernel thread */
	mkdir(strcat(strcpy(cmd, root), "/self"), 0755); /* not a pid */
	/* A user's look-alikes (exec -a): not root, or no status to tell. */
	fake_process_as(17, "slurmstepd: [8.extern]", 23, "uts:[111]", 1001);
	fake_process_as(18, "slurmstepd: [9.extern]", 23, "uts:[111]", -1);
	/* Root's look-alike (a program that is not slurmstepd), and a task of
	 * job 5's step 0 between fork and exec: slurmstepd's own child, with
	 * its title, which its exec would make the user's. Neither is read. */
	fake_process_full(19, "slurmstepd: [10.0]", 19, "uts:[111]", 0, "/usr/bin/bash", 1);
	fake_process_full(20, "slurmstepd: [5.0]", 18, "uts:[111]", 0, STEPD, 11);
	/* A replaced binary still running is slurmstepd; so is Debian's name. */
	fake_process_full(21, "slurmstepd: [11.0]", 19, "uts:[111]", 0, STEPD " (deleted)", 1);
	fake_process_full(22, "slurmstepd: [12.0]", 19, "uts:[111]", 0, "/usr/sbin/slurmstepd-wlm", 1);

	CHECK_INT(local_steps_scan(root, 111, &s), 0);
	CHECK_INT(s.count, 6);
	CHECK(!local_steps_has_job(&s, 10));
	CHECK(local_steps_has_job(&s, 11));
	CHECK(local_steps_has_job(&s, 12));
	for (size_t i = 0; i < s.count; i++)
		CHECK(s.steps[i].pid != 20);
	CHECK(local_steps_has_job(&s, 5));
	CHECK(local_steps_has_step(&s, 5, 0));
	CHECK(!local_steps_has_step(&s, 5, 1));
	CHECK(!local_steps_has_job(&s, 6));
	CHECK(local_steps_job_step(&s, 5) && local_steps_job_step(&s, 5)->pid == 15); /* its extern step first */
	CHECK(local_steps_job_step(&s, 7) && local_steps_job_step(&s, 7)->pid == 16);
	CHECK(local_steps_job_step(&s, 6) == NULL);
	CHECK(!local_steps_has_job(&s, 8));
	CHECK(!local_steps_has_job(&s, 9));
	local_steps_free(&s);

	CHECK_INT(local_steps_scan(root, 0, &s), 0);
	CHECK_INT(s.count, 7);
	CHECK(local_steps_has_job(&s, 6));
	CHECK(local_steps_job_step(&s, 6) && local_steps_job_step(&s, 6)->pid == 12);
	local_steps_free(&s);

	CHECK_INT(local_steps_scan("/nonexistent/proc", 0, &s), -1);

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root);
}

/* This node is the UTS namespace squashd runs in: the inode the
 * kernel gives its /proc/self/ns/uts link. */
static void test_this_node_is_our_own_uts_namespace(void)
{
	struct stat st;

	if (stat("/proc/self/ns/uts", &st) != 0) {
		UNIT_SKIP("cannot stat /proc/self/ns/uts");
		return;
	}
	CHECK(local_steps_this_node() != 0);
	CHECK_INT(local_steps_this_node(), st.st_ino);
}

int main(void)
{
	test_titles_of_every_release();
	test_other_processes_are_not_steps();
	test_scan_finds_one_nodes_steps();
	test_this_node_is_our_own_uts_namespace();
	return unit_exit_code();
}

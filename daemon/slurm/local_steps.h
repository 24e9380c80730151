/* Which jobs and steps run on this node, from what the node itself shows:
 * every running step has a slurmstepd, whose process title is
 * "slurmstepd: [JOBID.STEP]" on every Slurm from 22.05 to 26.05 (STEP is a
 * number, batch, extern, interactive or TBD; "+N" follows for a
 * heterogeneous component, " stepmgr" for a step manager). gc settles a
 * registry record from this and asks slurmctld only about the records it
 * cannot settle (docs/architecture.md, "gc"). */
#ifndef SQUASHD_LOCAL_STEPS_H
#define SQUASHD_LOCAL_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Steps that are not numbered ones: the extern step (PrologFlags=Contain:
 * it lives as long as the job on the node), and the others (batch,
 * interactive, TBD). Numbered steps are below both. */
#define LOCAL_STEP_EXTERN (UINT32_MAX - 1)
#define LOCAL_STEP_SPECIAL UINT32_MAX

struct local_step {
	uint32_t job_id;
	uint32_t step_id; /* a number, LOCAL_STEP_EXTERN or LOCAL_STEP_SPECIAL */
	pid_t pid;        /* its slurmstepd */
};

struct local_steps {
	struct local_step *steps;
	size_t count, capacity;
};

/* Reads one process title (a /proc/PID/cmdline, len bytes, NULs
 * allowed). Returns true for a slurmstepd of a job step, with its ids. */
bool local_steps_parse_title(const char *title, size_t len, uint32_t *job_id,
			     uint32_t *step_id);

/* The title (/proc/PID/cmdline, up to len bytes) of the process whose
 * /proc directory proc_dir is (in /proc, proc_root), read only when its
 * real, effective and saved uids are 0 and it runs a program named
 * slurmstepd* (Debian's is slurmstepd-wlm) that its parent does not run
 * (a slurmstepd's child before its exec is not read: it may become the
 * user's); -1 otherwise or when it cannot be read. */
ssize_t local_steps_root_title(int proc_root, int proc_dir, char *buf, size_t len);

/* This node: the inode of squashd's own UTS namespace (a node of the test
 * harness is a UTS namespace of its own, a real node has one), for
 * local_steps_scan; 0 when it cannot be read. */
unsigned long local_steps_this_node(void);

/* Collects the slurmstepd processes (titled as one, uids 0) under
 * proc_root ("/proc") whose UTS namespace is uts_inode (0: any; a node of
 * the test harness is a UTS namespace of its own, a real node has one). Processes that vanish
 * while being read are skipped. Returns 0, or -1 with errno when
 * proc_root cannot be read or memory runs out. */
int local_steps_scan(const char *proc_root, unsigned long uts_inode, struct local_steps *out);

/* Whether any step of the job (its extern or batch step included) runs
 * here. */
bool local_steps_has_job(const struct local_steps *s, uint32_t job_id);

/* Whether that numbered step of the job runs here. */
bool local_steps_has_step(const struct local_steps *s, uint32_t job_id, uint32_t step_id);

/* One of the job's steps here, its extern step when it has one; NULL when
 * none runs. */
const struct local_step *local_steps_job_step(const struct local_steps *s, uint32_t job_id);

void local_steps_free(struct local_steps *s);

#endif

/* Makes a running process make one system call, as a user who ptraces
 * their own process could (tests only; x86-64):
 *
 *   ptrace_syscall PID open PATH          prints the new descriptor
 *   ptrace_syscall PID close FD
 *   ptrace_syscall PID dup2 FD NEWFD
 *   ptrace_syscall PID inval FUSE_FD NODE  FUSE_NOTIFY_INVAL_INODE for NODE
 *                                          (its attributes are forgotten:
 *                                          the next stat asks the server)
 *   ptrace_syscall PID dups FD N           N copies of FD (fcntl F_DUPFD)
 *   ptrace_syscall PID locks FD N          N read locks of FD, bytes 0, 2, 4...
 *                                          (fcntl F_SETLK; each shows in the
 *                                          fdinfo of every copy of FD)
 *
 * The process is interrupted (PTRACE_SEIZE, PTRACE_INTERRUPT), its
 * registers and a piece of stack below the red zone saved, the call made
 * through the syscall instruction it stopped behind, and everything
 * restored (dups and locks: the call N times, in one stop). Exit status 0
 * with the (last) call's result on stdout (negative: -errno), 1 on
 * failure. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)

static int fail(const char *what)
{
	fprintf(stderr, "ptrace_syscall: %s: %s\n", what, strerror(errno));
	return 1;
}

/* Writes len bytes (a multiple of 8) at addr in pid; saves the old ones. */
static int poke(pid_t pid, unsigned long addr, const void *buf, size_t len, void *old)
{
	for (size_t i = 0; i < len; i += 8) {
		long word;
		errno = 0;
		word = ptrace(PTRACE_PEEKDATA, pid, (void *)(addr + i), NULL);
		if (errno)
			return -1;
		if (old)
			memcpy((char *)old + i, &word, 8);
		memcpy(&word, (const char *)buf + i, 8);
		if (ptrace(PTRACE_POKEDATA, pid, (void *)(addr + i), (void *)word) < 0)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct user_regs_struct saved, regs;
	unsigned char data[4096], old[4096];
	size_t len = 0;
	long nr, a1 = 0, a2 = 0, a3 = 0, times = 1;
	bool locks = false;
	int status;

	if (argc < 4) {
		fprintf(stderr, "usage: ptrace_syscall PID open PATH | close FD | dup2 FD NEWFD | inval FUSE_FD NODE | "
			"dups FD N | locks FD N\n");
		return 2;
	}
	pid_t pid = (pid_t)atoi(argv[1]);
	memset(data, 0, sizeof(data));
	if (!strcmp(argv[2], "open")) {
		len = strlen(argv[3]) + 1;
		if (len > sizeof(data) - 8)
			return 2;
		memcpy(data, argv[3], len);
		nr = SYS_openat, a1 = AT_FDCWD, a3 = O_RDONLY | O_CLOEXEC;
	} else if (!strcmp(argv[2], "close")) {
		nr = SYS_close, a1 = atol(argv[3]);
	} else if (!strcmp(argv[2], "dup2") && argc == 5) {
		nr = SYS_dup2, a1 = atol(argv[3]), a2 = atol(argv[4]);
	} else if (!strcmp(argv[2], "inval") && argc == 5) {
		/* fuse_out_header (len, error = notify code, unique 0), then
		 * fuse_notify_inval_inode_out (ino, off, len). */
		struct { uint32_t len; int32_t error; uint64_t unique; uint64_t ino; int64_t off, length; } m = {
			sizeof(m), 2 /* FUSE_NOTIFY_INVAL_INODE */, 0, strtoull(argv[4], NULL, 0), 0, 0 };
		memcpy(data, &m, sizeof(m));
		len = sizeof(m);
		nr = SYS_write, a1 = atol(argv[3]), a3 = (long)sizeof(m);
	} else if (!strcmp(argv[2], "dups") && argc == 5) {
		nr = SYS_fcntl, a1 = atol(argv[3]), a2 = F_DUPFD, a3 = 0, times = atol(argv[4]);
	} else if (!strcmp(argv[2], "locks") && argc == 5) {
		len = sizeof(struct flock);
		nr = SYS_fcntl, a1 = atol(argv[3]), a2 = F_SETLK, times = atol(argv[4]), locks = true;
	} else {
		return 2;
	}
	len = (len + 7) & ~(size_t)7;

	/* It must stop in (or just after) a system call: the two bytes before
	 * its instruction pointer are "syscall" (0f 05). A thread caught in
	 * its own code (between two calls) is let go and caught again. */
	for (int tries = 0;; tries++) {
		if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) < 0)
			return fail("PTRACE_SEIZE");
		if (ptrace(PTRACE_INTERRUPT, pid, NULL, NULL) < 0 || waitpid(pid, &status, __WALL) < 0)
			return fail("PTRACE_INTERRUPT");
		if (ptrace(PTRACE_GETREGS, pid, NULL, &saved) < 0)
			return fail("PTRACE_GETREGS");
		errno = 0;
		long code = ptrace(PTRACE_PEEKTEXT, pid, (void *)(saved.rip - 2), NULL);
		if (!errno && (code & 0xffff) == 0x050f)
			break;
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
		if (tries == 500) {
			fprintf(stderr, "ptrace_syscall: pid %d did not stop behind a syscall instruction "
				"in %d tries\n", (int)pid, tries + 1);
			return 1;
		}
		usleep(10000);
	}
	unsigned long buf = ((saved.rsp - 256 - len) & ~15UL); /* below the red zone */
	long result = 0;
	for (long i = 0; i < times && result >= 0; i++) {
		if (locks) {
			struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 2 * i, .l_len = 1 };
			memcpy(data, &fl, sizeof(fl));
		}
		if (len && poke(pid, buf, data, len, i ? NULL : old) < 0)
			return fail("PTRACE_POKEDATA");
		regs = saved;
		regs.rip = saved.rip - 2;
		regs.rax = (unsigned long)nr;
		regs.orig_rax = (unsigned long)-1;
		regs.rdi = (unsigned long)a1;
		regs.rsi = (unsigned long)a2;
		regs.rdx = locks ? buf : (unsigned long)a3;
		if (len && !locks)
			regs.rsi = buf;
		regs.r10 = 0;
		if (ptrace(PTRACE_SETREGS, pid, NULL, &regs) < 0 ||
		    ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) < 0 || waitpid(pid, &status, __WALL) < 0 ||
		    ptrace(PTRACE_GETREGS, pid, NULL, &regs) < 0)
			return fail("the call");
		result = (long)regs.rax;
	}
	if (len && poke(pid, buf, old, len, NULL) < 0)
		return fail("restoring the stack");
	if (ptrace(PTRACE_SETREGS, pid, NULL, &saved) < 0 || ptrace(PTRACE_DETACH, pid, NULL, NULL) < 0)
		return fail("restoring the registers");
	printf("%ld\n", result);
	return 0;
}

#else
int main(void)
{
	fprintf(stderr, "ptrace_syscall: x86-64 only\n");
	return 77;
}
#endif

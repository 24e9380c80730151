/* restrict_namespaces: runs a command under the seccomp filter that
 * systemd's RestrictNamespaces=yes installs (squashd.service sets it), so
 * that tests on a machine without systemd run squashd as the unit would:
 *
 *   restrict_namespaces [--clone3-errno=ENOSYS|EPERM] PROGRAM [ARG...]
 *
 * What systemd's filter refuses (src/shared/seccomp-util.c,
 * seccomp_restrict_namespaces): setns() whatever its arguments, unshare()
 * and clone() with any CLONE_NEW* flag, with EPERM; and clone3() as a
 * whole, since seccomp cannot read the flags behind its pointer: ENOSYS,
 * so that libc falls back to clone (--clone3-errno=EPERM shows what libc
 * does otherwise: pthread_create fails). Sets no_new_privs (the unit's
 * NoNewPrivileges=yes; needed to install a filter without CAP_SYS_ADMIN).
 * x86_64 only: elsewhere it says so and exits 77 (skip). */
#include "config.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

#define NS_FLAGS                                                                                  \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
	 CLONE_NEWCGROUP)

#define ARG0_LOW offsetof(struct seccomp_data, args[0]) /* little-endian: the low half */

int main(int argc, char **argv)
{
	unsigned clone3_errno = ENOSYS;
	int first = 1;

	if (argc > 1 && !strncmp(argv[1], "--clone3-errno=", 15)) {
		const char *e = argv[1] + 15;

		if (!strcmp(e, "EPERM"))
			clone3_errno = EPERM;
		else if (strcmp(e, "ENOSYS")) {
			fprintf(stderr, "restrict_namespaces: --clone3-errno: ENOSYS or EPERM\n");
			return 2;
		}
		first = 2;
	}
	if (first >= argc) {
		fprintf(stderr, "usage: restrict_namespaces [--clone3-errno=ENOSYS|EPERM] PROGRAM [ARG...]\n");
		return 2;
	}
#if !defined(__x86_64__)
	fprintf(stderr, "restrict_namespaces: only written for x86_64\n");
	return 77;
#else
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), /* SystemCallArchitectures=native elsewhere */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | clone3_errno),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setns, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LOW),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		fprintf(stderr, "restrict_namespaces: installing the filter: %s\n", strerror(errno));
		return 1;
	}
	execvp(argv[first], argv + first);
	fprintf(stderr, "restrict_namespaces: %s: %s\n", argv[first], strerror(errno));
	return 127;
#endif
}

/* Refusing descriptors passed over a unix socket (passed_fds.h). */
#include "config.h"

#include "passed_fds.h"

#include <errno.h>
#include <sys/socket.h>

/* Linux 6.16's value where the C library does not have it yet, on the
 * architectures whose socket options follow asm-generic (alpha's is the
 * same; parisc and sparc number theirs apart). */
#if !defined(SO_PASSRIGHTS) &&                                                       \
	(defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__arm__) || \
	 defined(__riscv) || defined(__powerpc__) || defined(__s390__) || defined(__loongarch__) || \
	 defined(__alpha__))
#define SO_PASSRIGHTS 83
#endif

int squash_refuse_passed_fds(int sock)
{
#ifdef SO_PASSRIGHTS
	int off = 0;

	return setsockopt(sock, SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof(off));
#else
	(void)sock;
	errno = ENOPROTOOPT;
	return -1;
#endif
}

/* close_from (close_from.h): close_range(2) where the kernel has it (5.9
 * and later), else one close per descriptor. */
#include "config.h"

#include "util/close_from.h"

#include <sys/syscall.h>
#include <unistd.h>

void close_from(int lowfd)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)lowfd, ~0U, 0) == 0)
		return;
#endif
	for (int fd = lowfd; fd < 65536; fd++)
		close(fd);
}

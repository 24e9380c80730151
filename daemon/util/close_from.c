/* close_from and close_all_but (close_from.h): close_range(2) where the
 * kernel has it (5.9 and later), else one close per descriptor. */
#include "config.h"

#include "util/close_from.h"

#include <stddef.h>
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

/* Closes [lo, hi]. */
static void close_between(int lo, int hi)
{
	if (lo > hi)
		return;
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0) == 0)
		return;
#endif
	for (int fd = lo; fd <= hi && fd < 65536; fd++)
		close(fd);
}

void close_all_but(const int *keep, size_t n)
{
	int kept[CLOSE_ALL_BUT_MAX], k = 0, from = 3;

	/* Sorted, without -1 and 0..2 (a short insertion sort: no malloc
	 * in a child of a threaded process). */
	for (size_t i = 0; i < n && k < CLOSE_ALL_BUT_MAX; i++) {
		int fd = keep[i], j = k;

		if (fd < 3)
			continue;
		while (j > 0 && kept[j - 1] > fd) {
			kept[j] = kept[j - 1];
			j--;
		}
		kept[j] = fd;
		k++;
	}
	for (int i = 0; i < k; i++) {
		close_between(from, kept[i] - 1);
		from = kept[i] + 1;
	}
	close_from(from);
}

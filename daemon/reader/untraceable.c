/* squash-reader --serve out of its user's reach by ptrace (untraceable.h). */
#include "config.h"

#include "reader/untraceable.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

/* The number after "key:" in /proc/PID/status (pid 0: self); -1 when
 * missing or unreadable. */
static long status_field(long pid, const char *key)
{
	char path[64], line[256];
	size_t n = strlen(key);
	long value = -1;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':' && sscanf(line + n + 1, "%ld", &value) == 1)
			break;
	fclose(f);
	return value;
}

int reader_make_untraceable(char *err, size_t errlen)
{
	long tracer;

	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		snprintf(err, errlen, "cannot make itself untraceable (prctl PR_SET_DUMPABLE): %s",
			 strerror(errno));
		return -1;
	}
	/* Root may trace anything anyway (an admin's strace -f of squashd);
	 * a tracer gone meanwhile reads as -1 and counts as a user's. */
	if ((tracer = status_field(0, "TracerPid")) > 0 && status_field(tracer, "Uid") != 0) {
		snprintf(err, errlen, "traced by pid %ld since its start", tracer);
		return -1;
	}
	return 0;
}
